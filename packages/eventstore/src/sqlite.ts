import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { systemClock, type Clock } from '@oc/contracts';
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

export interface SqliteEventStoreOptions {
  /** A file path, or `:memory:` for a private database that lives as long as the store. */
  filename: string;
  clock?: Clock;
  newId?: () => string;
  /** How often live subscriptions look for events appended by other processes on the same file. */
  pollIntervalMs?: number;
  /** How long an append waits for another process's write lock before failing. */
  busyTimeoutMs?: number;
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
interface PendingAppend {
  streamName: string;
  rows: Array<{ id: string; type: string; data: string; metadata: string }>;
  expected: ExpectedRevision;
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

/**
 * The embedded event store: one SQLite file in WAL mode, durable on commit (`synchronous = FULL`).
 *
 * Appends made during one turn of the event loop are written in one transaction (group commit: one fsync
 * for all of them), each still checked against its own expected revision. Every committed event is parsed
 * once and handed to all of this process's live subscriptions; a subscription behind the head reads pages
 * from the file until it catches up. Appends by other processes on the same file are found by polling.
 */
export class SqliteEventStore implements EventStore {
  /** The connection, shared with `SqliteCheckpointStore` so both live in one file. */
  readonly db: Database.Database;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly pollIntervalMs: number;
  private readonly commit: (batch: PendingAppend[], created: number) => { outcomes: Array<AppendResult | Error>; rows: EventRow[] };
  private readonly selectStream: Database.Statement<[string, number, number], EventRow>;
  private readonly selectAll: Database.Statement<[number, number], EventRow>;
  private readonly selectBetween: Database.Statement<[number, number], EventRow>;
  private readonly selectOne: Database.Statement<[], unknown>;
  private pending: PendingAppend[] = [];
  private flushScheduled = false;
  /** Every event up to here has been handed to the live feeds. */
  private head: number;
  private readonly live = new Set<Feed>();
  private readonly subscriptions = new Set<Subscription>();
  private poll: ReturnType<typeof setInterval> | undefined;

  constructor(options: SqliteEventStoreOptions) {
    this.clock = options.clock ?? systemClock;
    this.newId = options.newId ?? randomUUID;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.db = new Database(options.filename, { timeout: options.busyTimeoutMs ?? 5_000 });
    this.db.pragma('journal_mode = WAL');
    // FULL: with WAL, NORMAL would let a power loss take back commits that callers were told succeeded.
    this.db.pragma('synchronous = FULL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS events (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL,
        stream TEXT NOT NULL,
        revision INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        metadata TEXT NOT NULL,
        created INTEGER NOT NULL,
        UNIQUE (stream, revision)
      )`);

    const lastRevision = this.db
      .prepare<[string], number | null>('SELECT MAX(revision) FROM events WHERE stream = ?')
      .pluck();
    const insert = this.db
      .prepare<[string, string, number, string, string, string, number], number>(
        'INSERT INTO events (id, stream, revision, type, data, metadata, created) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING position',
      )
      .pluck();
    const transaction = this.db.transaction((batch: PendingAppend[], created: number) => {
      const outcomes: Array<AppendResult | Error> = [];
      const rows: EventRow[] = [];
      for (const append of batch) {
        // Read inside the transaction, so an earlier append of this batch to the same stream counts.
        const current = lastRevision.get(append.streamName) ?? null;
        const actual = current ?? 'no_stream';
        if (append.expected !== 'any' && append.expected !== actual) {
          outcomes.push(new WrongExpectedRevisionError(append.streamName, append.expected, actual));
          continue;
        }
        let revision = current ?? -1;
        let position = 0;
        for (const row of append.rows) {
          revision += 1;
          position = insert.get(row.id, append.streamName, revision, row.type, row.data, row.metadata, created)!;
          rows.push({ ...row, stream: append.streamName, revision, position, created });
        }
        outcomes.push({ nextExpectedRevision: revision, position });
      }
      return { outcomes, rows };
    });
    // IMMEDIATE takes the write lock before reading revisions, so another process cannot read the same
    // revision in between; it waits (busy timeout), then sees the new revision and fails the check.
    this.commit = (batch, created) => transaction.immediate(batch, created);

    this.selectStream = this.db.prepare(
      'SELECT * FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
    );
    this.selectAll = this.db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
    this.selectBetween = this.db.prepare('SELECT * FROM events WHERE position > ? AND position < ? ORDER BY position');
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
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // After this turn's I/O callbacks: every append they made joins the same commit.
        setImmediate(() => this.flush());
      }
    });
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<StoredEvent[]> {
    // LIMIT -1 is SQLite for "no limit".
    return this.selectStream.all(streamName, options.fromRevision ?? 0, options.maxCount ?? -1).map(toStored);
  }

  async readAll(options: ReadAllOptions): Promise<StoredEvent[]> {
    return this.readPage(options.after ?? 0, options.maxCount);
  }

  subscribeToAll(handler: BatchHandler, options: SubscribeOptions = {}): Subscription {
    const maxBatch = options.maxBatchSize ?? DEFAULT_MAX_BATCH;
    const feed: Feed = { position: options.after ?? 0, queue: new EventQueue(), live: false, stopped: false };
    this.poll ??= setInterval(() => this.pollOthers(), this.pollIntervalMs).unref();

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

  async ping(): Promise<void> {
    this.selectOne.get();
  }

  async close(): Promise<void> {
    if (this.pending.length > 0) this.flush();
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    clearInterval(this.poll);
    this.db.close();
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    this.flushScheduled = false;
    if (batch.length === 0) return;
    let committed: ReturnType<typeof this.commit>;
    try {
      committed = this.commit(batch, this.clock.now());
    } catch (error) {
      for (const append of batch) append.reject(error);
      return;
    }
    const { outcomes, rows } = committed;
    if (rows.length > 0) {
      // Another process may have committed just before us: its events come first.
      if (this.live.size > 0 && rows[0]!.position !== this.head + 1) {
        this.publish(this.selectBetween.all(this.head, rows[0]!.position).map(toStored));
      }
      this.publish(this.live.size > 0 ? rows.map(toStored) : [], rows.at(-1)!.position);
    }
    outcomes.forEach((outcome, i) => (outcome instanceof Error ? batch[i]!.reject(outcome) : batch[i]!.resolve(outcome)));
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

export class SqliteCheckpointStore implements CheckpointStore {
  private readonly select: Database.Statement<[string], number>;
  private readonly upsert: Database.Statement<[string, number]>;

  constructor(db: Database.Database) {
    db.exec('CREATE TABLE IF NOT EXISTS checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL)');
    this.select = db.prepare<[string], number>('SELECT position FROM checkpoints WHERE name = ?').pluck();
    this.upsert = db.prepare(
      'INSERT INTO checkpoints (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position',
    );
  }

  async load(name: string): Promise<number | undefined> {
    return this.select.get(name);
  }

  async store(name: string, position: number): Promise<void> {
    this.upsert.run(name, position);
  }
}

/** Both stores on one connection; closing closes the event store's subscriptions and the file. */
export function openSqliteStores(options: SqliteEventStoreOptions | string) {
  const store = new SqliteEventStore(typeof options === 'string' ? { filename: options } : options);
  const checkpoints = new SqliteCheckpointStore(store.db);
  return { store, checkpoints, close: () => store.close() };
}
