import { headers as createHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { NatsContext } from '@nestjs/microservices';
import { fail, internalError, serviceUnavailable, type Reply } from '@oc/contracts';

/** What a handler's `@Ctx()` offers in both modes: Nest's `NatsContext` (in-process builds one too). */
export type MessageContext = Pick<NatsContext, 'getHeaders' | 'getSubject'>;

/**
 * Headers reach handlers as NATS `MsgHdrs` in both modes (`ctx.getHeaders()?.get('traceparent')`),
 * or `undefined` when the caller sent none. `headersOf` gives the plain record most callers want.
 */
export function headersOf(ctx: MessageContext): Record<string, string> {
  const headers = ctx.getHeaders() as MsgHdrs | undefined;
  return Object.fromEntries(headers ? headers.keys().map((key) => [key, headers.get(key)]) : []);
}

export function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  const entries = Object.entries(record ?? {});
  if (entries.length === 0) return undefined;
  const headers = createHeaders();
  for (const [key, value] of entries) headers.set(key, value);
  return headers;
}

/**
 * A copy made the way the wire makes one (what `JSON.parse(JSON.stringify(value))` gives), so no mutable
 * object is shared across a hop. Strings are immutable, so they are shared rather than written out and read
 * back: a megabyte prompt costs nothing to copy (the JSON round trip took ~3 ms of the event loop for one).
 */
export const wireCopy = <T>(value: T): T => (value === undefined ? value : (copyAsJson(value, '') as T));

function copyAsJson(input: unknown, key: string): unknown {
  const value =
    input !== null && typeof input === 'object' && typeof (input as { toJSON?: unknown }).toJSON === 'function'
      ? (input as { toJSON(key: string): unknown }).toJSON(key)
      : input;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value + 0 : null;
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    case 'object': {
      if (value === null) return null;
      if (value instanceof Number || value instanceof String || value instanceof Boolean) return copyAsJson(value.valueOf(), key);
      // Array.from, not map: a hole in a sparse array is null on the wire too.
      if (Array.isArray(value)) return Array.from(value, (item, i) => copyAsJson(item, String(i)) ?? null);
      const copy: Record<string, unknown> = {};
      for (const name of Object.keys(value)) {
        const item = copyAsJson((value as Record<string, unknown>)[name], name);
        if (item === undefined) continue;
        // An own `__proto__` (JSON.parse makes one) must stay a property, not become the prototype.
        if (name === '__proto__') Object.defineProperty(copy, name, { value: item, enumerable: true, writable: true, configurable: true });
        else copy[name] = item;
      }
      return copy;
    }
    default:
      return undefined;
  }
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** The handler itself failed (it threw): Nest's exception filter answered with this data. */
export class RemoteHandlerError extends Error {
  constructor(readonly detail: unknown) {
    super(`The handler failed: ${JSON.stringify(detail)}`);
    this.name = 'RemoteHandlerError';
  }
}

/**
 * Requests never reject: a handler that threw is a 500, anything else (timeout, no responder,
 * connection lost) means the service could not be reached, a 503 the caller may retry.
 */
export const failureReply = (error: unknown): Reply<never> =>
  fail(error instanceof RemoteHandlerError ? internalError() : serviceUnavailable());

/** Broadcast subscribers run inside the transport's dispatch: one that throws must not break it. */
export function deliverSafely(deliver: () => void, onError: (error: unknown) => void): void {
  try {
    deliver();
  } catch (error) {
    onError(error);
  }
}
