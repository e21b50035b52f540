/**
 * The reservations of one account that are no longer open, remembered so that a repeated reserve, capture or
 * release is recognised as a repeat (docs/decisions.md, "Settled reservations, compactly"). Ids are kept
 * exactly, never as digests: a new reservation taken for a repeat would be work served without a charge.
 *
 * Captured and released reservations are remembered REPEAT_WINDOW_SECONDS after their settlement, which covers
 * every product's retries; they are the bulk (one per request), so they are kept compactly, in one bucket
 * per minute of settlement dropped whole once past the window: the ids as text, a thousand to a string, and an
 * open-addressing table of where each one is; 26–27 bytes a reservation with chat's ids, where a Map entry took
 * 205–357 (`account-memory.int.spec.ts`). Expired reservations (a capture must be refused `reservation_expired`), settlements recorded before
 * they carried their time, and ids the text cannot hold go to a plain map until their own time: rare, so
 * kept simply.
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
/** Ids joined into one string once this many have gathered (or the string would pass 64 KiB). */
const CHUNK_IDS = 1_024;
const MAX_CHUNK_CHARS = 0xffff;
const SEPARATOR = 32;
const MIN_TABLE = 16;
/** Chunks a bucket holds at most, so that a slot fits 32 bits: 67 million ids settled in one minute. */
const MAX_CHUNKS = 0xfffe;

const slotFor = (chunk: number, offset: number) => chunk * 0x10000 + offset + 1;

/** Up to and including the first underscore: the id source's prefix (`chatcmpl_`), shared by most ids. */
const prefixOf = (id: string) => id.slice(0, id.indexOf('_') + 1);

/** FNV-1a over `code` then `text` from `start` to `end`. */
function hash(code: number, text: string, start: number, end: number): number {
  let h = Math.imul(0x811c9dc5 ^ code, 0x01000193);
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * One minute's settlements. Each id is its prefix's code and the rest of it; `chunks` hold them joined by
 * spaces, `pending` those not yet joined. A table slot is `slotFor(chunk, offset)` (0: empty), where a chunk
 * index of `chunks.length` names `pending[offset]`.
 */
interface Bucket {
  minute: number;
  chunks: string[];
  pending: string[];
  pendingChars: number;
  table: Uint32Array;
  count: number;
}

interface Lasting {
  outcome: SettledOutcome;
  /** Recognised while the account's clock is at most this (unix seconds). */
  until: number;
}

/** What a snapshot keeps: the buckets' text as it is held (nothing is copied), the rest as it is. */
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
    else if (!COMPACT.test(id) || !this.insert(this.bucketFor(Math.floor(settledAt / 60)), ...this.split(id, true))) {
      this.keep(id, outcome, settledAt + REPEAT_WINDOW_SECONDS);
    }
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
    // The rest is looked up against the clock, so it is cleared out once a minute.
    if (Math.floor(now / 60) === minuteBefore) return;
    for (const [minute, ids] of this.lastingUntil) {
      if ((minute + 1) * 60 - 1 >= now) continue;
      for (const id of ids) if ((this.lasting.get(id)?.until ?? now) < now) this.lasting.delete(id);
      this.lastingUntil.delete(minute);
    }
  }

  encode(): EncodedSettled {
    return {
      clock: this.clock,
      prefixes: this.prefixes,
      buckets: this.buckets.map((b) => ({ minute: b.minute, chunks: b.pending.length > 0 ? [...b.chunks, b.pending.join(' ')] : b.chunks })),
      lasting: [...this.lasting].map(([id, { outcome, until }]) => [id, outcome, until]),
    };
  }

  static decode(data: EncodedSettled): SettledReservations {
    const settled = new SettledReservations();
    settled.clock = data.clock;
    settled.prefixes.splice(0, 1, ...data.prefixes);
    for (const { minute, chunks } of data.buckets) {
      // One id per chunk, and one more after each space.
      let count = chunks.length;
      for (const chunk of chunks) for (let at = chunk.indexOf(' '); at !== -1; at = chunk.indexOf(' ', at + 1)) count++;
      let size = MIN_TABLE;
      while (count * 4 > size * 3) size *= 2;
      const bucket: Bucket = { minute, chunks, pending: [], pendingChars: 0, table: new Uint32Array(size), count };
      for (const [c, chunk] of chunks.entries()) {
        for (let start = 0; start < chunk.length; ) {
          const found = chunk.indexOf(' ', start);
          const end = found === -1 ? chunk.length : found;
          place(bucket, hash(chunk.charCodeAt(start), chunk, start + 1, end), slotFor(c, start));
          start = end + 1;
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
    const bucket: Bucket = { minute, chunks: [], pending: [], pendingChars: 0, table: new Uint32Array(MIN_TABLE), count: 0 };
    this.buckets.splice(at === -1 ? this.buckets.length : at, 0, bucket);
    return bucket;
  }

  private find(id: string): boolean {
    if (this.buckets.length === 0 || !COMPACT.test(id)) return false;
    const [code, , restStart] = this.split(id, false);
    const h = hash(code, id, restStart, id.length);
    return this.buckets.some((b) => slotOf(b, h, code, id, restStart) !== -1);
  }

  /** Adds the id to the bucket unless it is there already; false when the bucket can hold no more. */
  private insert(bucket: Bucket, code: number, id: string, restStart: number): boolean {
    const h = hash(code, id, restStart, id.length);
    if (slotOf(bucket, h, code, id, restStart) !== -1) return true;
    const record = String.fromCharCode(code) + id.slice(restStart);
    if (bucket.pending.length === CHUNK_IDS || bucket.pendingChars + record.length + 1 > MAX_CHUNK_CHARS) {
      if (bucket.chunks.length === MAX_CHUNKS) return false;
      seal(bucket);
    }
    bucket.pending.push(record);
    bucket.pendingChars += record.length + 1;
    if ((bucket.count + 1) * 4 > bucket.table.length * 3) grow(bucket);
    place(bucket, h, slotFor(bucket.chunks.length, bucket.pending.length - 1));
    bucket.count++;
    return true;
  }
}

/** The table index holding the id (its code, then `id` from `restStart`), or -1. */
function slotOf(bucket: Bucket, h: number, code: number, id: string, restStart: number): number {
  const { table } = bucket;
  const mask = table.length - 1;
  const length = id.length - restStart + 1;
  for (let i = h & mask; ; i = (i + 1) & mask) {
    const slot = table[i]!;
    if (slot === 0) return -1;
    const [text, start] = recordAt(bucket, slot);
    if (text.charCodeAt(start) !== code) continue;
    const end = start + length;
    if (end > text.length || (end < text.length && text.charCodeAt(end) !== SEPARATOR)) continue;
    let same = true;
    for (let k = 1; k < length && same; k++) same = text.charCodeAt(start + k) === id.charCodeAt(restStart + k - 1);
    if (same) return i;
  }
}

/** The string a slot's record is in, and where it starts there. */
function recordAt(bucket: Bucket, slot: number): [string, number] {
  const chunk = Math.floor((slot - 1) / 0x10000);
  const offset = (slot - 1) % 0x10000;
  return chunk === bucket.chunks.length ? [bucket.pending[offset]!, 0] : [bucket.chunks[chunk]!, offset];
}

function place(bucket: Bucket, h: number, slot: number) {
  const { table } = bucket;
  const mask = table.length - 1;
  let i = h & mask;
  while (table[i] !== 0) i = (i + 1) & mask;
  table[i] = slot;
}

/** The hash of the record a slot points at. */
function hashOf(bucket: Bucket, slot: number): number {
  const [text, start] = recordAt(bucket, slot);
  const end = text.indexOf(' ', start);
  return hash(text.charCodeAt(start), text, start + 1, end === -1 ? text.length : end);
}

/** Joins the pending ids into a chunk and points their slots at it. */
function seal(bucket: Bucket) {
  const chunk = bucket.chunks.length;
  const { table } = bucket;
  const mask = table.length - 1;
  // Every slot found before any is rewritten: a rewritten one may read as another's pending slot.
  const at = bucket.pending.map((record, i) => {
    let index = hash(record.charCodeAt(0), record, 1, record.length) & mask;
    while (table[index] !== slotFor(chunk, i)) index = (index + 1) & mask;
    return index;
  });
  let offset = 0;
  for (const [i, record] of bucket.pending.entries()) {
    table[at[i]!] = slotFor(chunk, offset);
    offset += record.length + 1;
  }
  bucket.chunks.push(bucket.pending.join(' '));
  bucket.pending = [];
  bucket.pendingChars = 0;
}

function grow(bucket: Bucket) {
  const old = bucket.table;
  bucket.table = new Uint32Array(old.length * 2);
  for (const slot of old) if (slot !== 0) place(bucket, hashOf(bucket, slot), slot);
}
