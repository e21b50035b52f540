import { randomUUID } from 'node:crypto';
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

/**
 * A string of a snapshot this long or longer is a part: kept in a row of its own, named in the snapshot by key,
 * and written once however many snapshots hold it (an account's settled reservations, a minute's worth each).
 */
export const PART_CHARS = 16_384;
/** What stands for a part in a snapshot's JSON: an object with this one key, which no state's JSON holds. */
const PART = '\u0000part';

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
  db.exec('CREATE TABLE IF NOT EXISTS snapshot_parts (stream TEXT NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (stream, key)) WITHOUT ROWID');
  return db;
}

/**
 * Streams whose parts this process remembers, the most recently saved or loaded: their strings are held by the
 * states the command handler keeps (up to 10,000 streams), and only the busiest streams have parts at all.
 */
const REMEMBERED_STREAMS = 1_000;

/** The parts of a stream's snapshot that this process knows are in the file: as of the snapshot it last saw there. */
interface Written {
  revision: number;
  eventId: string;
  keys: Map<string, string>;
}

/**
 * Snapshots in a SQLite file of their own (not the event log: nothing there is published, and the log's writer
 * is never made to wait for them). Several processes may share the file (WAL, a busy timeout). A file that is
 * not a database or fails the quick check at open is moved aside and made anew (`openRebuildable`).
 *
 * A snapshot is written on the thread that decides its stream's commands, so its cost is a pause of that thread.
 * Its long strings (`PART_CHARS`) are parts, written once: a later snapshot holding the same string names the
 * part this process wrote, so a state whose bulk does not change between snapshots (text kept as it is, as the
 * account's settled reservations) costs what changed. Only while the file still holds this process's last
 * snapshot of the stream: after another process's, every part is written again.
 */
export class SqliteSnapshotStore implements SnapshotStore {
  private readonly db: Database.Database;
  private readonly select: Database.Statement<[string], { revision: number; event_id: string; version: number; state: string }>;
  private readonly upsert: Database.Statement<[string, number, string, number, string]>;
  private readonly selectParts: Database.Statement<[string], { key: string; text: string }>;
  private readonly insertPart: Database.Statement<[string, string, string]>;
  private readonly deleteOtherParts: Database.Statement<[string, string]>;
  private readonly deletePart: Database.Statement<[string, string]>;
  private readonly written = new Map<string, Written>();
  private readonly saveInTransaction: (streamName: string, snapshot: Snapshot) => void;

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
    this.selectParts = this.db.prepare('SELECT key, text FROM snapshot_parts WHERE stream = ?');
    this.insertPart = this.db.prepare('INSERT OR REPLACE INTO snapshot_parts (stream, key, text) VALUES (?, ?, ?)');
    this.deleteOtherParts = this.db.prepare('DELETE FROM snapshot_parts WHERE stream = ? AND key NOT IN (SELECT value FROM json_each(?))');
    this.deletePart = this.db.prepare('DELETE FROM snapshot_parts WHERE stream = ? AND key = ?');
    this.saveInTransaction = this.db.transaction((streamName: string, snapshot: Snapshot) => this.write(streamName, snapshot));
  }

  load(streamName: string): Snapshot | undefined {
    try {
      const row = this.select.get(streamName);
      if (!row) return undefined;
      const parts = new Map(this.selectParts.all(streamName).map(({ key, text }) => [key, text]));
      const keys = new Map<string, string>();
      const state: unknown = JSON.parse(row.state, (_, value: unknown) => {
        const key = partKey(value);
        if (key === undefined) return value;
        const text = parts.get(key);
        if (text === undefined) throw new Error(`the snapshot of ${streamName} names a part the file does not hold`);
        keys.set(text, key);
        return text;
      });
      this.remember(streamName, { revision: row.revision, eventId: row.event_id, keys });
      return { revision: row.revision, eventId: row.event_id, version: row.version, state };
    } catch (error) {
      this.onError(error);
      return undefined;
    }
  }

  save(streamName: string, snapshot: Snapshot): void {
    try {
      this.saveInTransaction(streamName, snapshot);
    } catch (error) {
      this.written.delete(streamName);
      this.onError(error);
    }
  }

  private write(streamName: string, snapshot: Snapshot) {
    const current = this.select.get(streamName);
    const last = this.written.get(streamName);
    // The file holds the parts of the snapshot it holds: this process's last one's, or others it does not know.
    const known = last && current?.revision === last.revision && current.event_id === last.eventId ? last.keys : undefined;
    const keys = new Map<string, string>();
    const added: Array<[string, string]> = [];
    const state = JSON.stringify(snapshot.state, (_, value: unknown) => {
      if (typeof value !== 'string' || value.length < PART_CHARS) return value;
      let key = keys.get(value) ?? known?.get(value);
      if (key === undefined) {
        key = randomUUID();
        added.push([key, value]);
      }
      keys.set(value, key);
      return { [PART]: key };
    });
    // An older snapshot than the one kept changes nothing, its parts included.
    if (this.upsert.run(streamName, snapshot.revision, snapshot.eventId, snapshot.version, state).changes === 0) return;
    for (const [key, text] of added) this.insertPart.run(streamName, key, text);
    if (known) {
      for (const [text, key] of known) if (!keys.has(text)) this.deletePart.run(streamName, key);
    } else {
      this.deleteOtherParts.run(streamName, JSON.stringify([...keys.values()]));
    }
    this.remember(streamName, { revision: snapshot.revision, eventId: snapshot.eventId, keys });
  }

  private remember(streamName: string, written: Written) {
    this.written.delete(streamName);
    this.written.set(streamName, written);
    if (this.written.size > REMEMBERED_STREAMS) this.written.delete(this.written.keys().next().value!);
  }

  close(): void {
    this.db.close();
  }
}

/** The key of a part's stand-in, or undefined for any other value. */
function partKey(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const key = (value as Record<string, unknown>)[PART];
  return typeof key === 'string' && Object.keys(value).length === 1 ? key : undefined;
}
