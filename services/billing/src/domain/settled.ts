import { Buffer } from 'node:buffer';

/**
 * The reservations of one account that are no longer open, remembered so that a repeated reserve, capture or
 * release is recognised as a repeat (docs/decisions.md, "Settled reservations, compactly"). Ids are kept
 * exactly, never as digests: a new reservation taken for a repeat would be work served without a charge.
 *
 * Captured and released reservations are remembered REPEAT_WINDOW_SECONDS after their settlement, which covers
 * every product's retries; they are the bulk (one per request), so they are kept compactly, in one bucket per
 * minute of settlement dropped whole once past the window: the ids as one-byte text (written into a byte
 * buffer, then kept as strings of up to 64 KiB) and an open-addressing table of where each one is; 32–39 bytes
 * a reservation with chat's ids, where a Map entry took 205–357 (`account-memory.int.spec.ts`). Expired
 * reservations (a capture must be refused `reservation_expired`), settlements recorded before they carried
 * their time, and ids the text cannot hold go to a plain map until their own time: rare, so kept simply.
 *
 * Time is the account's clock: the latest `reserved_at` of its reservations (what `advance` is given), so that
 * folding the stream again gives the same state. Evolving is in place, as the account's (see `evolve`).
 */

/** How long after its capture or release a reservation is still recognised; see docs/decisions.md. */
export const REPEAT_WINDOW_SECONDS = 300;
/** How long past its expiry an expired reservation (or one settled before settlements carried a time) is recognised. */
export const SETTLED_RETENTION_SECONDS = 3_600;

export type SettledOutcome = 'captured' | 'released' | 'expired';

/**
 * A compact id: printable ASCII that JSON writes as it is (no space, quote or backslash), at most 255
 * characters. Our ids (`chatcmpl_…`, `cmpl_…`, `video_…`) all are.
 */
const COMPACT = /^[!#-[\]-~]{1,255}$/;
/** The prefixes an account's ids are kept under, each named by one character of the text. */
const PREFIX_CODES = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Each id is followed by one. */
const SEPARATOR = 32;
/**
 * A chunk's length at most, so that an offset in it fits 16 bits. A slot (chunk and offset) fits 32 bits until a
 * bucket holds 4 GiB of ids, four times the service's whole heap.
 */
const CHUNK_BYTES = 0x10000;
const MIN_TABLE = 16;
/** A table is grown past this share of its slots in use, by half. */
const LOAD = 0.75;
const MIN_PENDING = 256;
const NOTHING_PENDING = new Uint8Array(0);

/** Up to and including the first underscore: the id source's prefix (`chatcmpl_`), shared by most ids. */
const prefixOf = (id: string) => id.slice(0, id.indexOf('_') + 1);

/** FNV-1a over `code` then `text` from `start` to `end`. */
function hash(code: number, text: string, start: number, end: number): number {
  let h = Math.imul(0x811c9dc5 ^ code, 0x01000193);
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * One minute's settlements. Each id is written as its prefix's code, the rest of it, and a space: into
 * `pending` first, whose bytes become a string of `chunks` once full or once the minute is over. A table slot is
 * `slotFor(chunk, offset)` (0: empty); a chunk index of `chunks.length` names the offset in `pending`, which
 * stays the id's offset once `pending` is a chunk. The table is sized for the minute before's settlements (its
 * size need not be a power of two), so that a steady account's fills it to about LOAD without growing.
 */
interface Bucket {
  minute: number;
  chunks: string[];
  pending: Uint8Array;
  pendingLength: number;
  table: Uint32Array;
  count: number;
}

const slotFor = (chunk: number, offset: number) => chunk * CHUNK_BYTES + offset + 1;
const chunkOf = (slot: number) => Math.floor((slot - 1) / CHUNK_BYTES);
const offsetOf = (slot: number) => (slot - 1) % CHUNK_BYTES;

interface Lasting {
  outcome: SettledOutcome;
  /** Recognised while the account's clock is at most this (unix seconds). */
  until: number;
}

/** What a snapshot keeps: the buckets' strings as they are held (none is copied), the rest as it is. */
export interface EncodedSettled {
  clock: number;
  prefixes: string[];
  buckets: Array<{ minute: number; chunks: string[] }>;
  lasting: Array<[string, SettledOutcome, number]>;
}

export class SettledReservations {
  private clock = 0;
  private readonly prefixes: string[] = [''];
  private readonly buckets: Bucket[] = [];
  private readonly lasting = new Map<string, Lasting>();
  /** The ids of `lasting` by the minute after which they are forgotten. */
  private readonly lastingUntil = new Map<number, string[]>();

  /** How many settled reservations are held (some past their time until the next minute's forgetting). */
  get size(): number {
    return this.buckets.reduce((n, b) => n + b.count, 0) + this.lasting.size;
  }

  /** Whether the reservation expired or was captured or released, while it is recognised. */
  outcome(id: string): 'expired' | 'settled' | undefined {
    const kept = this.lasting.get(id);
    if (kept && kept.until >= this.clock) return kept.outcome === 'expired' ? 'expired' : 'settled';
    return this.find(id) ? 'settled' : undefined;
  }

  /**
   * `settledAt` (unix seconds) is absent on settlements recorded before they carried it; `expiresAt` is the
   * reservation's (null on those made before reservations expired).
   */
  add(id: string, outcome: SettledOutcome, settledAt: number | undefined, expiresAt: number | null): void {
    if (outcome === 'expired' || settledAt === undefined) this.keep(id, outcome, (expiresAt ?? 0) + SETTLED_RETENTION_SECONDS);
    else if (!COMPACT.test(id)) this.keep(id, outcome, settledAt + REPEAT_WINDOW_SECONDS);
    else this.insert(this.bucketFor(Math.floor(settledAt / 60)), ...this.split(id, true));
  }

  /** Moves the account's clock on to `now` (never back) and forgets what is past its time. */
  advance(now: number): void {
    if (now <= this.clock) return;
    const minuteBefore = Math.floor(this.clock / 60);
    this.clock = now;
    // A bucket's last second is (minute + 1) * 60 - 1; it goes once that is past the window.
    const keptFrom = Math.floor((now - REPEAT_WINDOW_SECONDS) / 60);
    let gone = 0;
    while (gone < this.buckets.length && this.buckets[gone]!.minute < keptFrom) gone++;
    if (gone > 0) this.buckets.splice(0, gone);
    const minute = Math.floor(now / 60);
    if (minute === minuteBefore) return;
    // Once a minute: the minutes past take (next to) no more settlements, so their bytes become strings without
    // room to spare; what is looked up against the clock is cleared out.
    for (const bucket of this.buckets) if (bucket.minute < minute) seal(bucket, true);
    for (const [until, ids] of this.lastingUntil) {
      if ((until + 1) * 60 - 1 >= now) continue;
      for (const id of ids) if ((this.lasting.get(id)?.until ?? now) < now) this.lasting.delete(id);
      this.lastingUntil.delete(until);
    }
  }

  encode(): EncodedSettled {
    return {
      clock: this.clock,
      prefixes: this.prefixes,
      buckets: this.buckets.map((b) => ({ minute: b.minute, chunks: b.pendingLength > 0 ? [...b.chunks, pendingText(b)] : b.chunks })),
      lasting: [...this.lasting].map(([id, { outcome, until }]) => [id, outcome, until]),
    };
  }

  static decode(data: EncodedSettled): SettledReservations {
    const settled = new SettledReservations();
    settled.clock = data.clock;
    settled.prefixes.splice(0, 1, ...data.prefixes);
    for (const { minute, chunks } of data.buckets) {
      let count = 0;
      for (const chunk of chunks) for (let at = chunk.indexOf(' '); at !== -1; at = chunk.indexOf(' ', at + 1)) count++;
      const bucket: Bucket = { minute, chunks, pending: NOTHING_PENDING, pendingLength: 0, table: new Uint32Array(tableFor(count)), count };
      for (const [c, chunk] of chunks.entries()) {
        for (let start = 0, end = chunk.indexOf(' '); end !== -1; start = end + 1, end = chunk.indexOf(' ', start)) {
          place(bucket, hash(chunk.charCodeAt(start), chunk, start + 1, end), slotFor(c, start));
        }
      }
      settled.buckets.push(bucket);
    }
    for (const [id, outcome, until] of data.lasting) settled.keep(id, outcome, until);
    return settled;
  }

  private keep(id: string, outcome: SettledOutcome, until: number) {
    this.lasting.set(id, { outcome, until });
    const minute = Math.floor(until / 60);
    const due = this.lastingUntil.get(minute);
    if (due) due.push(id);
    else this.lastingUntil.set(minute, [id]);
  }

  /**
   * The id's prefix code and where the rest of it starts. With `learn`, a prefix not seen before gets a code
   * while codes last; an id whose prefix has none is kept whole under the empty prefix, as it is looked up.
   */
  private split(id: string, learn: boolean): [code: number, id: string, restStart: number] {
    const prefix = prefixOf(id);
    let index = this.prefixes.indexOf(prefix);
    if (index === -1 && learn && this.prefixes.length < PREFIX_CODES.length) index = this.prefixes.push(prefix) - 1;
    if (index === -1) return [PREFIX_CODES.charCodeAt(0), id, 0];
    return [PREFIX_CODES.charCodeAt(index), id, prefix.length];
  }

  private bucketFor(minute: number): Bucket {
    const last = this.buckets.at(-1);
    if (last && last.minute === minute) return last;
    // Settlements arrive in the order of their time, give or take the clocks of billing's replicas.
    const at = this.buckets.findIndex((b) => b.minute >= minute);
    if (at !== -1 && this.buckets[at]!.minute === minute) return this.buckets[at]!;
    const before = at === -1 ? last : this.buckets[at - 1];
    const bucket: Bucket = { minute, chunks: [], pending: NOTHING_PENDING, pendingLength: 0, table: new Uint32Array(tableFor(before?.count ?? 0)), count: 0 };
    this.buckets.splice(at === -1 ? this.buckets.length : at, 0, bucket);
    return bucket;
  }

  private find(id: string): boolean {
    if (this.buckets.length === 0 || !COMPACT.test(id)) return false;
    const [code, , restStart] = this.split(id, false);
    const h = hash(code, id, restStart, id.length);
    return this.buckets.some((b) => slotOf(b, h, code, id, restStart) !== -1);
  }

  /** Adds the id to the bucket unless it is there already. */
  private insert(bucket: Bucket, code: number, id: string, restStart: number) {
    const h = hash(code, id, restStart, id.length);
    if (slotOf(bucket, h, code, id, restStart) !== -1) return;
    const bytes = id.length - restStart + 2;
    if (bucket.pendingLength + bytes > CHUNK_BYTES) seal(bucket, false);
    const at = bucket.pendingLength;
    if (at + bytes > bucket.pending.length) {
      // By a quarter: the last minute's buffer is the one with room to spare, and it is copied seldom enough.
      const grown = new Uint8Array(Math.min(CHUNK_BYTES, Math.max(MIN_PENDING, Math.ceil(1.25 * bucket.pending.length), at + bytes)));
      grown.set(bucket.pending.subarray(0, at));
      bucket.pending = grown;
    }
    const { pending } = bucket;
    pending[at] = code;
    for (let k = restStart; k < id.length; k++) pending[at + 1 + k - restStart] = id.charCodeAt(k);
    pending[at + bytes - 1] = SEPARATOR;
    bucket.pendingLength += bytes;
    if (bucket.count + 1 > bucket.table.length * LOAD) grow(bucket);
    place(bucket, h, slotFor(bucket.chunks.length, at));
    bucket.count++;
  }
}

/** The table index holding the id (its code, then `id` from `restStart`), or -1. */
function slotOf(bucket: Bucket, h: number, code: number, id: string, restStart: number): number {
  const { table, chunks, pending } = bucket;
  const length = id.length - restStart;
  for (let i = h % table.length; ; i = i + 1 === table.length ? 0 : i + 1) {
    const slot = table[i]!;
    if (slot === 0) return -1;
    const chunk = chunkOf(slot);
    const start = offsetOf(slot) + 1;
    let same: boolean;
    if (chunk === chunks.length) {
      same = pending[start - 1] === code && pending[start + length] === SEPARATOR;
      for (let k = 0; k < length && same; k++) same = pending[start + k] === id.charCodeAt(restStart + k);
    } else {
      const text = chunks[chunk]!;
      same = text.charCodeAt(start - 1) === code && text.charCodeAt(start + length) === SEPARATOR;
      for (let k = 0; k < length && same; k++) same = text.charCodeAt(start + k) === id.charCodeAt(restStart + k);
    }
    if (same) return i;
  }
}

function place(bucket: Bucket, h: number, slot: number) {
  const { table } = bucket;
  let i = h % table.length;
  while (table[i] !== 0) i = i + 1 === table.length ? 0 : i + 1;
  table[i] = slot;
}

/** Slots for `count` ids at about LOAD. */
const tableFor = (count: number) => Math.max(MIN_TABLE, Math.ceil(count / LOAD) + 1);

/** The hash of the id a slot points at. */
function hashOf(bucket: Bucket, slot: number): number {
  const chunk = chunkOf(slot);
  const offset = offsetOf(slot);
  if (chunk < bucket.chunks.length) {
    const text = bucket.chunks[chunk]!;
    return hash(text.charCodeAt(offset), text, offset + 1, text.indexOf(' ', offset));
  }
  let h = Math.imul(0x811c9dc5 ^ bucket.pending[offset]!, 0x01000193);
  for (let i = offset + 1; bucket.pending[i] !== SEPARATOR; i++) h = Math.imul(h ^ bucket.pending[i]!, 0x01000193);
  return h >>> 0;
}

const pendingText = (bucket: Bucket) => Buffer.from(bucket.pending.buffer, bucket.pending.byteOffset, bucket.pendingLength).toString('latin1');

/**
 * Makes the pending bytes a chunk: every id keeps its offset, so the table stays as it is. `release` gives the
 * buffer up (a minute that is over); otherwise it is written over by the next ids.
 */
function seal(bucket: Bucket, release: boolean) {
  if (bucket.pendingLength > 0) bucket.chunks.push(pendingText(bucket));
  bucket.pendingLength = 0;
  if (release) bucket.pending = NOTHING_PENDING;
}

function grow(bucket: Bucket) {
  const old = bucket.table;
  bucket.table = new Uint32Array(Math.ceil(old.length * 1.5));
  for (const slot of old) if (slot !== 0) place(bucket, hashOf(bucket, slot), slot);
}
