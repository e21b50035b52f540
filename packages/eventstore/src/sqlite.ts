import type { MessagePort } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { systemClock, type Clock, uuidV7 } from '@oc/contracts';
import { telemetryEnabled } from '@oc/telemetry';
import { eventStoreMetrics } from './metrics';
import {
  WrongExpectedRevisionError,
  type BatchHandler,
  type AppendResult,
  type CheckpointStore,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
} from './port';
import { DEFAULT_MAX_BATCH, EventQueue } from './queue';
import { startWorker } from './worker-calls';
import { EventLogCorruptError, isCorruptionError } from './sqlite-files';
import { type CommitOutcome, createWriter, openDatabase, type PendingRows } from './eventstore-writer.mjs';

export interface SqliteEventStoreOptions {
  /** A file path, or `:memory:` for a private database that lives as long as the store. */
  filename: string;
  clock?: Clock;
  newId?: () => string;
  /** How often live subscriptions look for events appended by other processes on the same file. */
  pollIntervalMs?: number;
  /** How long an append waits for another process's write lock before failing. */
  busyTimeoutMs?: number;
  /**
   * Reads only: no writer is started and appends are refused. For a thread that follows a file another
   * thread of the process writes (a projection thread), told of each commit through `poll()`.
   */
  readOnly?: boolean;
}

interface EventRow {
  position: number;
  id: string;
  stream: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  created: number;
}

/** An append waiting for the next group commit, its events already serialized. */
interface PendingAppend extends PendingRows {
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

interface Feed {
  /** Last position handed to the handler (or the subscription's start). */
  position: number;
  queue: EventQueue;
  live: boolean;
  stopped: boolean;
}

/** Where commits happen: a worker thread for a file, this thread for `:memory:` (one connection only). */
interface WriteSide {
  commit(batch: PendingRows[], created: number): Promise<CommitOutcome[]>;
  storeCheckpoint(name: string, position: number): Promise<void>;
  /** Tells `port` the last position of every commit from now on. */
  announceCommitsTo(port: MessagePort): Promise<void>;
  close(): Promise<void>;
}

const readOnly = (): WriteSide => {
  const refuse = () => Promise.reject(new Error('This event store was opened read-only'));
  return { commit: refuse, storeCheckpoint: refuse, announceCommitsTo: refuse, close: async () => {} };
};

function inThisThread(db: Database.Database): WriteSide {
  const writer = createWriter(db);
  return {
    commit: async (batch, created) => writer.commit(batch, created),
    storeCheckpoint: async (name, position) => writer.storeCheckpoint(name, position),
    announceCommitsTo: () => Promise.reject(new Error('A :memory: store has no other thread to tell')),
    close: async () => {},
  };
}

/** The writer in a worker thread. */
function inWorker(filename: string, busyTimeoutMs: number): WriteSide {
  const worker = startWorker(
    new URL('./eventstore-writer.mjs', import.meta.url),
    { role: 'oc-sqlite-event-writer', filename, busyTimeoutMs },
    'event store writer',
  );
  return {
    commit: (batch, created) =>
      worker.call<CommitOutcome[]>({
        kind: 'commit',
        // Only the data crosses to the worker (a pending append also holds its promise's callbacks).
        batch: batch.map(({ streamName, rows, expected }) => ({ streamName, rows, expected })),
        created,
      }),
    storeCheckpoint: (name, position) => worker.call<void>({ kind: 'checkpoint', name, position }),
    announceCommitsTo: (port) => worker.call<void>({ kind: 'listen', port }, [port]),
    close: () => worker.close(),
  };
}

/** A live subscriber further behind than this reads from the file instead, so its queue stays bounded. */
const LIVE_QUEUE_LIMIT = 10_000;

const toStored = (row: EventRow): StoredEvent => ({
  id: row.id,
  type: row.type,
  data: JSON.parse(row.data),
  metadata: JSON.parse(row.metadata),
  streamName: row.stream,
  revision: row.revision,
  position: row.position,
  created: row.created,
});

const SQLITE = { 'db.system.name': 'sqlite' };

/** A group commit's time (from its start to the writer's answer) and how many appends it wrote. */
function recordCommit(started: number, appends: number) {
  const metrics = eventStoreMetrics();
  metrics.commitDuration.record((performance.now() - started) / 1000, SQLITE);
  metrics.commitAppends.record(appends, SQLITE);
}

/**
 * The embedded event store: one SQLite file in WAL mode, durable on commit (`synchronous = FULL`).
 *
 * Appends made during one turn of the event loop are written in one transaction (group commit: one fsync
 * for all of them), each still checked against its own expected revision. Commits run in a worker thread,
 * so the fsync never blocks the event loop, and appends arriving meanwhile form the next group. Every
 * committed event is parsed once and handed to all of this process's live subscriptions; a subscription
 * behind the head reads pages from the file until it catches up. Appends by other processes on the same
 * file are found by polling.
 */
export class SqliteEventStore implements EventStore {
  /** This thread's connection: reads, and (for `:memory:`) writes. */
  readonly db: Database.Database;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly pollIntervalMs: number;
  private readonly writer: WriteSide;
  private readonly selectStream: Database.Statement<[string, number], EventRow>;
  private readonly selectStreamPage: Database.Statement<[string, number, number], EventRow>;
  private readonly selectAll: Database.Statement<[number, number], EventRow>;
  private readonly selectBetween: Database.Statement<[number, number], EventRow>;
  private readonly selectCheckpoint: Database.Statement<[string], number>;
  private readonly selectOne: Database.Statement<[], unknown>;
  private pending: PendingAppend[] = [];
  private flushScheduled = false;
  private committing: Promise<void> | undefined;
  /** Every event up to here has been handed to the live feeds. */
  private head: number;
  private readonly live = new Set<Feed>();
  private readonly subscriptions = new Set<Subscription>();
  private pollTimer: ReturnType<typeof setInterval> | undefined;

  constructor(options: SqliteEventStoreOptions) {
    this.clock = options.clock ?? systemClock;
    // Time-ordered: read models keyed by an event's id (ledger lines) then grow at the end of their index.
    this.newId = options.newId ?? (() => uuidV7());
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
    try {
      this.db = openDatabase(options.filename, busyTimeoutMs);
    } catch (error) {
      throw isCorruptionError(error) ? new EventLogCorruptError(options.filename, error.message) : error;
    }
    this.writer = options.readOnly
      ? readOnly()
      : options.filename === ':memory:'
        ? inThisThread(this.db)
        : inWorker(options.filename, busyTimeoutMs);
    // Without a bound LIMIT when none is asked for: a bound one slows every lookup (measured, read models).
    this.selectStream = this.db.prepare('SELECT * FROM events WHERE stream = ? AND revision >= ? ORDER BY revision');
    this.selectStreamPage = this.db.prepare('SELECT * FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?');
    this.selectAll = this.db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
    this.selectBetween = this.db.prepare('SELECT * FROM events WHERE position > ? AND position < ? ORDER BY position');
    this.selectCheckpoint = this.db.prepare<[string], number>('SELECT position FROM checkpoints WHERE name = ?').pluck();
    this.selectOne = this.db.prepare('SELECT 1');
    this.head = this.db.prepare<[], number | null>('SELECT MAX(position) FROM events').pluck().get() ?? 0;
  }

  async appendToStream(
    streamName: string,
    events: NewEvent[],
    options: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult> {
    if (events.length === 0) throw new RangeError('appendToStream needs at least one event');
    // Serialized here, so an event that cannot be stored fails its own append and never the whole group.
    const rows = events.map((event) => ({
      id: event.id ?? this.newId(),
      type: event.type,
      data: JSON.stringify(event.data ?? null),
      metadata: JSON.stringify(event.metadata ?? {}),
    }));
    return new Promise((resolve, reject) => {
      this.pending.push({ streamName, rows, expected: options.expectedRevision, resolve, reject });
      if (!this.flushScheduled && !this.committing) {
        this.flushScheduled = true;
        // After this turn's I/O callbacks: every append they made joins the same commit.
        setImmediate(() => this.flush());
      }
    });
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<StoredEvent[]> {
    const from = options.fromRevision ?? 0;
    const rows =
      options.maxCount === undefined ? this.selectStream.all(streamName, from) : this.selectStreamPage.all(streamName, from, options.maxCount);
    return rows.map(toStored);
  }

  async readAll(options: ReadAllOptions): Promise<StoredEvent[]> {
    return this.readPage(options.after ?? 0, options.maxCount);
  }

  subscribeToAll(handler: BatchHandler, options: SubscribeOptions = {}): Subscription {
    const maxBatch = options.maxBatchSize ?? DEFAULT_MAX_BATCH;
    const feed: Feed = { position: options.after ?? 0, queue: new EventQueue(), live: false, stopped: false };
    this.pollTimer ??= setInterval(() => this.pollOthers(), this.pollIntervalMs).unref();

    const nextBatch = async (): Promise<StoredEvent[]> => {
      if (!feed.live) {
        const page = this.readPage(feed.position, maxBatch);
        // Nothing newer in the file: from now on commits reach this feed directly (no await in between).
        if (page.length === 0) this.join(feed);
        return page;
      }
      const batch = await feed.queue.take(maxBatch);
      // Right after joining, the file may have shown this feed events the others are only now being handed.
      let skip = 0;
      while (skip < batch.length && batch[skip]!.position <= feed.position) skip++;
      return skip === 0 ? batch : batch.slice(skip);
    };

    const done = (async () => {
      while (!feed.stopped) {
        const batch = await nextBatch();
        if (feed.stopped) return;
        if (batch.length === 0) continue;
        try {
          await handler(batch);
        } catch (error) {
          options.onError?.(error, batch);
          return;
        }
        feed.position = batch.at(-1)!.position;
      }
    })().finally(() => {
      this.live.delete(feed);
      this.subscriptions.delete(subscription);
    });

    const subscription: Subscription = {
      stop: async () => {
        feed.stopped = true;
        this.live.delete(feed);
        feed.queue.interrupt();
        await done;
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async headPosition(): Promise<number> {
    // Commits of other processes reach the live feeds now, not at the next poll: a reader waiting for
    // this position would otherwise wait for the poll.
    this.pollOthers();
    return this.head > 0 ? this.head : -1;
  }

  async ping(): Promise<void> {
    this.selectOne.get();
  }

  /** Commits what was appended, stops the subscriptions, then the writer and the connection. */
  async close(): Promise<void> {
    while (this.committing || this.pending.length > 0) await (this.committing ?? this.flush());
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    clearInterval(this.pollTimer);
    await this.writer.close();
    this.db.close();
  }

  /**
   * Another thread of this process learns of each commit as soon as it is made (its last position, as a
   * number on `port`), without this thread's event loop in between: the writer thread tells it.
   */
  announceCommitsTo(port: MessagePort): Promise<void> {
    return this.writer.announceCommitsTo(port);
  }

  /** Hands the live subscriptions what was committed since the head, by this process or another. */
  poll(): void {
    this.pollOthers();
  }

  loadCheckpoint(name: string): number | undefined {
    return this.selectCheckpoint.get(name);
  }

  storeCheckpoint(name: string, position: number): Promise<void> {
    return this.writer.storeCheckpoint(name, position);
  }

  /** Commits the pending appends as one group; appends arriving meanwhile wait for the next. */
  private flush(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return Promise.resolve();
    const created = this.clock.now();
    const started = telemetryEnabled() ? performance.now() : undefined;
    this.committing = this.writer
      .commit(batch, created)
      .then(
        (outcomes) => {
          if (started !== undefined) recordCommit(started, batch.length);
          this.settle(batch, outcomes, created);
        },
        (error: unknown) => {
          // What was queued behind a failed commit fails with it rather than commit after it, so a stored append
          // never had a failed one ahead of it: a caller answered on an earlier append's decision (a capture
          // answered once decided) never has its next append (the session's exchange) stored without it.
          const behind = this.pending;
          this.pending = [];
          for (const append of [...batch, ...behind]) append.reject(error);
        },
      )
      .finally(() => {
        this.committing = undefined;
        if (this.pending.length > 0) void this.flush();
      });
    return this.committing;
  }

  private settle(batch: PendingAppend[], outcomes: CommitOutcome[], created: number): void {
    // Only the events a poll has not handed over already (one may have run between the commit and this answer),
    // and only built when a live feed takes them.
    const wanted = this.live.size > 0;
    const fresh: StoredEvent[] = [];
    let first = 0;
    let last = 0;
    outcomes.forEach((outcome, i) => {
      if ('conflict' in outcome) return;
      const { rows, streamName } = batch[i]!;
      rows.forEach((row, n) => {
        const position = outcome.firstPosition + n;
        if (position <= this.head) return;
        if (first === 0) first = position;
        last = position;
        if (!wanted) return;
        const { id, type, data, metadata } = row;
        const revision = outcome.firstRevision + n;
        fresh.push({ id, type, data: JSON.parse(data), metadata: JSON.parse(metadata), streamName, revision, position, created });
      });
    });
    if (last > 0) {
      // Another process may have committed just before us: its events come first.
      if (wanted && first !== this.head + 1) this.publish(this.selectBetween.all(this.head, first).map(toStored));
      this.publish(fresh, last);
    }
    outcomes.forEach((outcome, i) => {
      const append = batch[i]!;
      if ('conflict' in outcome) {
        append.reject(new WrongExpectedRevisionError(append.streamName, append.expected, outcome.conflict));
      } else {
        const last = append.rows.length - 1;
        append.resolve({ nextExpectedRevision: outcome.firstRevision + last, position: outcome.firstPosition + last });
      }
    });
  }

  /** Hands events (consecutive, after `head`) to every live feed; a feed too far behind goes back to reading the file. */
  private publish(events: StoredEvent[], head = events.at(-1)?.position): void {
    if (head === undefined) return;
    for (const feed of this.live) {
      if (feed.queue.length + events.length > LIVE_QUEUE_LIMIT) {
        feed.live = false;
        this.live.delete(feed);
        feed.queue.clear();
        feed.queue.interrupt();
      } else {
        feed.queue.push(events);
      }
    }
    this.head = Math.max(this.head, head);
  }

  private join(feed: Feed): void {
    feed.live = true;
    this.live.add(feed);
  }

  /** Events other processes appended to the file since the head. */
  private pollOthers(): void {
    for (;;) {
      const page = this.selectAll.all(this.head, DEFAULT_MAX_BATCH);
      if (page.length === 0) return;
      this.publish(this.live.size > 0 ? page.map(toStored) : [], page.at(-1)!.position);
      if (page.length < DEFAULT_MAX_BATCH) return;
    }
  }

  private readPage(after: number, maxCount: number): StoredEvent[] {
    return this.selectAll.all(after, maxCount).map(toStored);
  }
}

/** Checkpoints in the event store's file: read on this thread, written by the store's writer. */
export class SqliteCheckpointStore implements CheckpointStore {
  constructor(private readonly events: SqliteEventStore) {}

  async load(name: string): Promise<number | undefined> {
    return this.events.loadCheckpoint(name);
  }

  store(name: string, position: number): Promise<void> {
    return this.events.storeCheckpoint(name, position);
  }
}

/** Both stores on one file; closing closes the event store's subscriptions and the file. */
export function openSqliteStores(options: SqliteEventStoreOptions | string) {
  const store = new SqliteEventStore(typeof options === 'string' ? { filename: options } : options);
  const checkpoints = new SqliteCheckpointStore(store);
  return { store, checkpoints, close: () => store.close() };
}
