import { randomFillSync } from 'node:crypto';

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

/** Random bytes are drawn 4 KiB at a time: one system call serves about eighty ids. */
const pool = Buffer.alloc(4096);
let used = pool.length;

function randomByte(): number {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  return pool[used++]!;
}

/** 24 base62 characters, about 143 bits of randomness (bytes of 248 and above are skipped, so no bias). */
export function randomId(length = 24): string {
  let out = '';
  while (out.length < length) {
    const b = randomByte();
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
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

/**
 * Runs `task` at once and then every `periodMs` by the injected clock, one run at a time. A short
 * real-time tick compares the clock with the next due time, so on a `ManualClock` moved by hand a test
 * sees the task run without waiting for real time. A failing run is reported and tried at the next period.
 */
export function repeatByClock(
  clock: Clock,
  periodMs: number,
  task: () => Promise<unknown>,
  onError: (error: unknown) => void,
  tickMs = 250,
): { stop(): Promise<void> } {
  let dueAt = clock.now();
  let running: Promise<void> | undefined;
  const tick = () => {
    if (running || clock.now() < dueAt) return;
    dueAt = clock.now() + periodMs;
    running = task()
      .then(
        () => undefined,
        (error: unknown) => onError(error),
      )
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();
  tick();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
