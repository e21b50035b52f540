import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openRebuildable } from './sqlite-files';

/**
 * A stream's state as of one revision, kept so that a long stream (an account's millions of reservations) is
 * loaded from it and the events after it instead of from its first event. A cache, never a source of truth:
 * it names the id of the event at its revision, and is used only while the store still holds that event there.
 */
export interface Snapshot {
  revision: number;
  /** The id of the stream's event at `revision`. */
  eventId: string;
  /** The decider's snapshot version: a snapshot of another version is ignored. */
  version: number;
  state: unknown;
}

/** A cache: it never throws, a failure to read or keep a snapshot only makes loads longer (and is reported). */
export interface SnapshotStore {
  load(streamName: string): Snapshot | undefined;
  /** Keeps the latest snapshot of the stream; an older one than what is kept changes nothing. */
  save(streamName: string, snapshot: Snapshot): void;
  close(): void;
}

/** How a decider's state is kept in a snapshot, and how often: every `every` events of its stream. */
export interface SnapshotCodec<State> {
  /** Raised whenever the state's shape or what `evolve` makes of an event changes: older snapshots are then ignored. */
  version: number;
  every: number;
  encode(state: State): unknown;
  decode(data: unknown): State;
}

/** The codec of a state that is plain JSON already (no Map, Set, Date or undefined in it). */
export const jsonSnapshots = <State>(version: number, every: number): SnapshotCodec<State> => ({
  version,
  every,
  encode: (state) => state,
  decode: (data) => data as State,
});

/**
 * A process's snapshots: `<dataDir>/snapshots.sqlite`, a failure to read or keep one logged as a warning, and
 * a corrupt file moved aside (one warning) and started anew.
 */
export const openSnapshotStore = (dataDir: string, logger: { warn(fields: object, message: string): void }) =>
  new SqliteSnapshotStore(
    join(dataDir, 'snapshots.sqlite'),
    (err) => logger.warn({ err }, 'a snapshot was not read or kept'),
    (message) => logger.warn({}, message),
  );

/** Opens the file as every connection to it must. */
function openSnapshotFile(filename: string): Database.Database {
  const db = new Database(filename, { timeout: 5_000 });
  db.pragma('journal_mode = WAL');
  // A cache may lose its last writes, but must never be corrupt after a crash. OFF lets the OS write pages in
  // any order, so a power loss or OS crash mid-checkpoint can leave a corrupt file; with WAL, NORMAL syncs only
  // at checkpoints (never on commit), so it costs a snapshot nothing and a crash only takes back the last ones.
  db.pragma('synchronous = NORMAL');
  db.exec(
    'CREATE TABLE IF NOT EXISTS snapshots (stream TEXT PRIMARY KEY, revision INTEGER NOT NULL, event_id TEXT NOT NULL, version INTEGER NOT NULL, state TEXT NOT NULL)',
  );
  return db;
}

/**
 * Snapshots in a SQLite file of their own (not the event log: nothing there is published, and the log's writer
 * is never made to wait for them). Several processes may share the file (WAL, a busy timeout). A file that is
 * not a database or fails the quick check at open is moved aside and made anew (`openRebuildable`).
 */
export class SqliteSnapshotStore implements SnapshotStore {
  private readonly db: Database.Database;
  private readonly select: Database.Statement<[string], { revision: number; event_id: string; version: number; state: string }>;
  private readonly upsert: Database.Statement<[string, number, string, number, string]>;

  constructor(
    filename: string,
    private readonly onError: (error: unknown) => void,
    onRebuilt: (message: string) => void = (message) => onError(new Error(message)),
    now: () => number = Date.now,
  ) {
    this.db = openRebuildable(filename, openSnapshotFile, onRebuilt, now);
    this.select = this.db.prepare('SELECT revision, event_id, version, state FROM snapshots WHERE stream = ?');
    this.upsert = this.db.prepare(
      `INSERT INTO snapshots (stream, revision, event_id, version, state) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision, event_id = excluded.event_id, version = excluded.version, state = excluded.state
       WHERE excluded.revision > snapshots.revision OR excluded.version <> snapshots.version`,
    );
  }

  load(streamName: string): Snapshot | undefined {
    try {
      const row = this.select.get(streamName);
      return row && { revision: row.revision, eventId: row.event_id, version: row.version, state: JSON.parse(row.state) };
    } catch (error) {
      this.onError(error);
      return undefined;
    }
  }

  save(streamName: string, snapshot: Snapshot): void {
    try {
      this.upsert.run(streamName, snapshot.revision, snapshot.eventId, snapshot.version, JSON.stringify(snapshot.state));
    } catch (error) {
      this.onError(error);
    }
  }

  close(): void {
    this.db.close();
  }
}
