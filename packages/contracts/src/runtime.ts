import { randomFillSync } from 'node:crypto';

/** Time comes in from outside so that expiry, back-off and windows are tested without sleeping. */
export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

export const unixSeconds = (ms: number) => Math.floor(ms / 1000);

/**
 * The replicas of one service, as one of them sees them. Work that must be done once (a video's job, a
 * webhook delivery's attempts, a completion's settlement) names the replica that owns it in its stream; only
 * that replica does it, and another takes it over, by an append with the expected revision, once the owner
 * is gone.
 */
export interface Replicas {
  /** This replica's name, recorded on the work it owns. */
  readonly self: string;
  /**
   * Other processes may run this service on the same event store at the same time: kept decider state can
   * be behind (`CommandHandler`'s `otherWriters`), and queries wait for the whole log (`readLatest`).
   */
  readonly shared: boolean;
  /** Whether the replica of this name has stopped, so that its work may be taken over. Never true of `self`. */
  isGone(replica: string): Promise<boolean>;
  /**
   * This process's own name among the runs of `self` (a replica started again keeps its name, not this): a
   * caller waiting on its work watches it, and knows the work lost once another process or none answers.
   * Absent where nobody can watch (one process alone).
   */
  readonly incarnation?: string;
}

/**
 * One process alone on its data (`pnpm start`, unit tests): every other name is a process that ran before
 * and is gone, so its unfinished work is this one's to take over.
 */
export const aloneReplica = (self: string): Replicas => ({ self, shared: false, isGone: async (replica) => replica !== self });

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

/** Milliseconds since the epoch in 7 base62 characters (enough until the year 2081), sorting as the time does. */
function timePart(ms: number): string {
  let out = '';
  for (let rest = Math.floor(ms), i = 0; i < 7; i++, rest = Math.floor(rest / 62)) out = ALPHABET[rest % 62] + out;
  return out;
}

/**
 * 24 base62 characters after the prefix: the creation time (7) then randomness (17, about 101 bits). Ids made
 * later sort later, so each new stream or document lands at the end of its index instead of at a random page
 * (measured: a commit of the event log writes a third fewer pages); guessing one is as hopeless as before.
 */
export const sortableIds: IdSource = { next: (prefix) => `${prefix}${timePart(Date.now())}${randomId(17)}` };

/** A version 7 UUID (RFC 9562): the millisecond time first, then randomness, so event ids sort as they were made. */
export function uuidV7(ms = Date.now()): string {
  const bytes = Buffer.allocUnsafe(16);
  bytes.writeUIntBE(Math.floor(ms), 0, 6);
  for (let i = 6; i < 16; i++) bytes[i] = randomByte();
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A clock tests can move by hand. Its time lives in shared memory, so that another thread of the process
 * (the gateway's, in standalone mode) reads the same time through `clockFromShared(clock.shared)`.
 */
export class ManualClock implements Clock {
  readonly shared = new SharedArrayBuffer(8);
  private readonly time = new Float64Array(this.shared);
  constructor(ms = Date.UTC(2026, 0, 1)) {
    this.time[0] = ms;
  }
  now() {
    return this.time[0]!;
  }
  advance(ms: number) {
    this.time[0]! += ms;
  }
  set(ms: number) {
    this.time[0] = ms;
  }
}

/** What another thread needs to read a clock: the system's, or a `ManualClock`'s shared time. */
export type ShareableClock = { kind: 'system' } | { kind: 'shared'; time: SharedArrayBuffer };

export function shareClock(clock: Clock): ShareableClock {
  if (clock === systemClock) return { kind: 'system' };
  if (clock instanceof ManualClock) return { kind: 'shared', time: clock.shared };
  throw new TypeError('Only the system clock and a ManualClock can be shared with another thread');
}

export function clockFromShared(shared: ShareableClock): Clock {
  if (shared.kind === 'system') return systemClock;
  const time = new Float64Array(shared.time);
  return { now: () => time[0]! };
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
