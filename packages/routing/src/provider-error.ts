/**
 * How a provider call failed, as the router needs to know it. Every provider adapter throws this (and only
 * this) for a failed call, so that routing, the circuit breakers and the customer's answer never depend on
 * one provider's error classes.
 *
 * - `retryable`: another deployment (or this one later) may well succeed: connection errors, timeouts, 408,
 *   409, 429, 5xx and Anthropic's 529 "overloaded". The router fails over to the next deployment.
 * - `deployment`: this deployment cannot serve anything as configured (401, 402, 403, 404: a wrong key or
 *   model id, our account with the provider out of credit). The router fails over too, and the breaker counts it.
 * - `request`: the provider refused this request itself (400, 413, 422). Another deployment of the same
 *   model would refuse it too, so there is no failover; the customer gets a 400.
 *
 * `detail` is what the provider said: it may name our account with it, its quota or its key, so it goes to
 * the operator's log only, never into an event, a read model or an answer.
 */
export type ProviderErrorKind = 'retryable' | 'deployment' | 'request';

export class ProviderError extends Error {
  readonly kind: ProviderErrorKind;
  /** The provider's HTTP status, when it answered one. */
  readonly status: number | undefined;
  /** How long the provider asked us to wait (`Retry-After`, `retry-after-ms`), in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** For the operator's log only. */
  readonly detail: string;

  constructor(options: { kind: ProviderErrorKind; message: string; detail?: string; status?: number; retryAfterMs?: number }) {
    super(options.message);
    this.name = 'ProviderError';
    this.kind = options.kind;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.detail = options.detail ?? options.message;
  }
}

/** The kind of failure an HTTP status means, by the rules above. */
export function kindOfStatus(status: number): ProviderErrorKind {
  if (status === 408 || status === 409 || status === 425 || status === 429 || status >= 500) return 'retryable';
  if (status === 401 || status === 402 || status === 403 || status === 404) return 'deployment';
  return 'request';
}

/**
 * A provider's answer with an HTTP status as a `ProviderError`. The message names the status only: what the
 * provider wrote goes in `detail`.
 */
export function providerHttpError(provider: string, status: number, detail: string, retryAfterMs?: number): ProviderError {
  return new ProviderError({
    kind: kindOfStatus(status),
    status,
    message: `${provider} answered ${status}.`,
    detail: `${provider} answered ${status}: ${detail.slice(0, 500)}`,
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });
}

/** No answer at all (connection refused or reset, DNS, TLS) or none in time: worth trying elsewhere. */
export function providerUnreachable(provider: string, cause: unknown, timedOut = false): ProviderError {
  const reason = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  return new ProviderError({
    kind: 'retryable',
    message: timedOut ? `${provider} did not answer in time.` : `${provider} could not be reached.`,
    detail: `${provider} ${timedOut ? 'timed out' : 'unreachable'}: ${reason.slice(0, 500)}`,
  });
}

/**
 * A `Retry-After` (seconds or an HTTP date) or `retry-after-ms` header in milliseconds; undefined when absent
 * or unreadable. `now` is the caller's clock, for the date form.
 */
export function retryAfterMs(header: (name: string) => string | null | undefined, now: number): number | undefined {
  const ms = Number(header('retry-after-ms'));
  if (header('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return ms;
  const value = header('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** What the operator's log says of a failed call: a provider's own words (its `detail`), which go nowhere else. */
export function failureDetail(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return (error as { detail?: string }).detail ?? error.message;
}
