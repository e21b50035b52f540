import type { KeyPrincipal } from '@oc/contracts';

const MINUTE = 60;
const DAY = 86_400;

/** One counting window: at most `points` per `durationSeconds` for `subject`. */
export interface LimitWindow {
  /** Also the limiter's key prefix: windows of the same name and size share counters across gateways. */
  name: string;
  subject: string;
  points: number;
  durationSeconds: number;
}

/**
 * The request windows that apply to one authenticated request, from the spec's Limits table: the key's own
 * per-minute limit, the organization's per-minute and per-day limits, and on chat endpoints its chat
 * per-minute limit. The organization's figures come with the key's principal (its tier's, or custom ones),
 * so a change reaches every gateway as a tier change does: billing's broadcast drops the cached principal.
 */
export function requestWindows(principal: KeyPrincipal, chat: boolean): LimitWindow[] {
  const { limits } = principal;
  const windows: LimitWindow[] = [
    { name: 'key_minute', subject: principal.key_id, points: principal.rate_limit_per_minute, durationSeconds: MINUTE },
    { name: 'org_minute', subject: principal.org_id, points: limits.requests_per_minute, durationSeconds: MINUTE },
    { name: 'org_day', subject: principal.org_id, points: limits.requests_per_day, durationSeconds: DAY },
  ];
  if (chat) {
    windows.push({ name: 'chat_minute', subject: principal.org_id, points: limits.chat_requests_per_minute, durationSeconds: MINUTE });
  }
  return windows;
}

/** The chat tokens-per-day window of an organization: checked before a chat call, charged after it. */
export function chatTokenWindow(principal: KeyPrincipal): LimitWindow {
  return {
    name: 'chat_tokens_day',
    subject: principal.org_id,
    points: principal.limits.chat_tokens_per_day,
    durationSeconds: DAY,
  };
}

/** Failed authentications per client address per minute, unless `AUTH_FAILURES_PER_MINUTE` says otherwise. */
export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 60;

/** Requests that fail authentication are counted per client address, so key guessing is throttled too. */
export function anonymousWindow(address: string, pointsPerMinute: number): LimitWindow {
  return { name: 'anonymous_minute', subject: address, points: pointsPerMinute, durationSeconds: MINUTE };
}

/**
 * Failed admin-token authentications on `/admin/v1` per client address per minute: as many as the API's
 * (`AUTH_FAILURES_PER_MINUTE`), counted apart, so that a client retrying a bad API key does not lock out an
 * operator at the same address.
 */
export function adminAuthWindow(address: string, pointsPerMinute: number): LimitWindow {
  return { name: 'admin_auth_minute', subject: address, points: pointsPerMinute, durationSeconds: MINUTE };
}

/**
 * Failed console sign-ins: per client address, and per email at that address. Never per email alone: a window
 * anyone can fill from anywhere would lock the member out (ten wrong passwords did, for 15 minutes).
 */
export const CONSOLE_SIGN_IN_FAILURES = { perAddress: 20, perEmailAtAddress: 10, windowSeconds: 15 * MINUTE };

export function consoleSignInWindows(address: string, email: string | undefined): LimitWindow[] {
  const { perAddress, perEmailAtAddress, windowSeconds } = CONSOLE_SIGN_IN_FAILURES;
  return [
    { name: 'console_sign_in_address', subject: address, points: perAddress, durationSeconds: windowSeconds },
    ...(email ? [{ name: 'console_sign_in_email_address', subject: `${email} ${address}`, points: perEmailAtAddress, durationSeconds: windowSeconds }] : []),
  ];
}

/**
 * A subject that fills a window of failed authentications is locked out: the window's length the first time,
 * twice as long each time it fills it again within `memorySeconds` of the first, up to `maxSeconds`. A patient
 * guesser gets a window's worth of guesses per doubling wait, a few hundred a week, where a fixed window would
 * give it one every window, forever; someone who mistyped waits no longer than the window.
 */
export const LOCKOUT = { memorySeconds: 7 * DAY, maxSeconds: DAY };

export function lockoutSeconds(window: LimitWindow, lockouts: number): number {
  return Math.min(window.durationSeconds * 2 ** Math.max(0, lockouts - 1), LOCKOUT.maxSeconds);
}

/** How many times a subject has filled a window: counted, never refusing. */
export function lockoutsWindow(window: LimitWindow): LimitWindow {
  return { name: `${window.name}_lockouts`, subject: window.subject, points: Number.MAX_SAFE_INTEGER, durationSeconds: LOCKOUT.memorySeconds };
}

/** Requests one console session may make per minute; the console's pages make a few every few seconds. */
export const CONSOLE_REQUESTS_PER_MINUTE = 600;

export function consoleSessionWindow(sessionId: string): LimitWindow {
  return { name: 'console_minute', subject: sessionId, points: CONSOLE_REQUESTS_PER_MINUTE, durationSeconds: MINUTE };
}
