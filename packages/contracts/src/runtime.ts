import { randomBytes } from 'node:crypto';

/** Time comes in from outside so that expiry, back-off and windows are tested without sleeping. */
export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

export const unixSeconds = (ms: number) => Math.floor(ms / 1000);

/** Ids come in from outside too; prefixes follow the spec (`video_`, `chat_`, `wh_` …). */
export interface IdSource {
  next(prefix: string): string;
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** 24 base62 characters, about 143 bits of randomness. */
export function randomId(length = 24): string {
  const bytes = randomBytes(length * 2);
  let out = '';
  for (let i = 0; i < bytes.length && out.length < length; i++) {
    const b = bytes[i]!;
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out.length === length ? out : out + randomId(length - out.length);
}

export const randomIds: IdSource = { next: (prefix) => `${prefix}${randomId()}` };

/** A clock tests can move by hand. */
export class ManualClock implements Clock {
  constructor(private ms = Date.UTC(2026, 0, 1)) {}
  now() {
    return this.ms;
  }
  advance(ms: number) {
    this.ms += ms;
  }
  set(ms: number) {
    this.ms = ms;
  }
}
