import { z } from 'zod';
import { toApiError } from './domain-errors';
import { ApiError, ApiErrorSchema } from './errors';
import { validationError } from './validation';

/** Every request/reply answer on the bus: the value, or the API error to show the client. */
export const ReplySchema = z.union([
  z.object({ ok: z.literal(true), data: z.unknown() }),
  z.object({ ok: z.literal(false), error: ApiErrorSchema }),
]);
export type Reply<T = unknown> = { ok: true; data: T } | { ok: false; error: z.infer<typeof ApiErrorSchema> };

export const ok = <T>(data: T): Reply<T> => ({ ok: true, data });
export const fail = (error: ApiError): Reply<never> => ({ ok: false, error: error.toData() });

export function unwrap<T>(reply: Reply<T>): T {
  if (reply.ok) return reply.data;
  throw new ApiError(reply.error);
}

/**
 * The body of every request/reply handler: validate the message against its contract, run the work,
 * and answer with a Reply. Unexpected errors become a 500 reply and are reported through `onUnexpected`.
 */
export async function answer<S extends z.ZodType, T>(
  schema: S,
  payload: unknown,
  work: (message: z.output<S>) => Promise<T> | T,
  onUnexpected?: (error: unknown) => void,
): Promise<Reply<T>> {
  const parsed = schema.safeParse(payload);
  if (!parsed.success) return fail(validationError(parsed.error, payload));
  try {
    return ok(await work(parsed.data));
  } catch (error) {
    const apiError = toApiError(error);
    if (apiError.status >= 500) onUnexpected?.(error);
    return fail(apiError);
  }
}
