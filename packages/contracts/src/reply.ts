import { z } from 'zod';
import { ApiError, ApiErrorSchema } from './errors';

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
