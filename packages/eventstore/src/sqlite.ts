import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { systemClock, type Clock } from '@oc/contracts';
import {
  WrongExpectedRevisionError,
  type AllHandler,
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

export interface SqliteEventStoreOptions {
  /** A file path, or `:memory:` for a private database that lives as long as the store. */
  filename: string;
  clock?: Clock;
  newId?: () => string;
  /** How often subscriptions look for events appended by other processes on the same file. */
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

const PAGE_SIZE = 256;

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

export class SqliteEventStore implements EventStore {
  /** The connection, shared with `SqliteCheckpointStore` so both live in one file. */
  readonly db: Database.Database;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly pollIntervalMs: number;
  private readonly append: (streamName: string, events: NewEvent[], expected: ExpectedRevision) => AppendResult;
  private readonly selectStream: Database.Statement<[string, number, number], EventRow>;
  private readonly selectAll: Database.Statement<[number, number], EventRow>;
  private readonly selectOne: Database.Statement<[], unknown>;
  /** Wakes this store's live subscriptions; appends from other processes are found by polling instead. */
  private readonly wakers = new Set<() => void>();
  private readonly subscriptions = new Set<Subscription>();

  constructor(options: SqliteEventStoreOptions) {
    this.clock = options.clock ?? systemClock;
    this.newId = options.newId ?? randomUUID;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.db = new Database(options.filename, { timeout: options.busyTimeoutMs ?? 5_000 });
    this.db.pragma('journal_mode = WAL');
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
    const insert = this.db.prepare(
      `INSERT INTO events (id, stream, revision, type, data, metadata, created)
       VALUES (@id, @stream, @revision, @type, @data, @metadata, @created)`,
    );
    const transaction = this.db.transaction((streamName: string, events: NewEvent[], expected: ExpectedRevision) => {
      const current = lastRevision.get(streamName);
      const actual = current ?? 'no_stream';
      if (expected !== 'any' && expected !== actual) throw new WrongExpectedRevisionError(streamName, expected, actual);
      const created = this.clock.now();
      let revision = current ?? -1;
      let position = 0;
      for (const event of events) {
        revision += 1;
        const { lastInsertRowid } = insert.run({
          id: event.id ?? this.newId(),
          stream: streamName,
          revision,
          type: event.type,
          data: JSON.stringify(event.data ?? null),
          metadata: JSON.stringify(event.metadata ?? {}),
          created,
        });
        position = Number(lastInsertRowid);
      }
      return { nextExpectedRevision: revision, position };
    });
    // IMMEDIATE takes the write lock before reading the revision, so a second process cannot read the same
    // revision in between; it waits (busy timeout), then sees the new revision and fails the check.
    this.append = (streamName, events, expected) => transaction.immediate(streamName, events, expected);

    this.selectStream = this.db.prepare(
      'SELECT * FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
    );
    this.selectAll = this.db.prepare('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?');
    this.selectOne = this.db.prepare('SELECT 1');
  }

  async appendToStream(
    streamName: string,
    events: NewEvent[],
    options: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult> {
    if (events.length === 0) throw new RangeError('appendToStream needs at least one event');
    const result = this.append(streamName, events, options.expectedRevision);
    for (const wake of this.wakers) wake();
    return result;
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<StoredEvent[]> {
    // LIMIT -1 is SQLite for "no limit".
    return this.selectStream.all(streamName, options.fromRevision ?? 0, options.maxCount ?? -1).map(toStored);
  }

  async readAll(options: ReadAllOptions): Promise<StoredEvent[]> {
    return this.readPage(options.after ?? 0, options.maxCount);
  }

  subscribeToAll(handler: AllHandler, options: SubscribeOptions = {}): Subscription {
    let position = options.after ?? 0;
    let stopped = false;
    let wake = () => {};
    const poke = () => wake();
    this.wakers.add(poke);
    const poll = setInterval(poke, this.pollIntervalMs);

    const done = (async () => {
      while (!stopped) {
        // Waiting only right after a read that found nothing (with no await in between) means no append is missed.
        const page = this.readPage(position, PAGE_SIZE);
        if (page.length === 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          continue;
        }
        for (const event of page) {
          if (stopped) return;
          try {
            await handler(event);
          } catch (error) {
            options.onError?.(error, event);
            return;
          }
          position = event.position;
        }
      }
    })().finally(() => {
      clearInterval(poll);
      this.wakers.delete(poke);
      this.subscriptions.delete(subscription);
    });

    const subscription: Subscription = {
      stop: async () => {
        stopped = true;
        wake();
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
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.db.close();
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
