// The SQLite event store's write side, in plain JavaScript so that it can run as a worker thread from the
// sources (tests, tsx) and from a bundle alike: commits, with their fsync, then never block the event loop.
// `sqlite.ts` uses it in a worker for a file, and in its own thread for `:memory:`.
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const SCHEMA = `
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
  );
  CREATE TABLE IF NOT EXISTS checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL);
`;

/** Opens the file as every connection to it must: WAL, and durable on commit. */
export function openDatabase(filename, busyTimeoutMs) {
  const db = new Database(filename, { timeout: busyTimeoutMs });
  db.pragma('journal_mode = WAL');
  // FULL: with WAL, NORMAL would let a power loss take back commits that callers were told succeeded.
  db.pragma('synchronous = FULL');
  // The writer copies the log back into the file (and fsyncs it) once the log holds this many pages: at the
  // default 1,000 that happened every few dozen commits and tripled a commit's time (measured, decisions.md).
  db.pragma('wal_autocheckpoint = 10000');
  db.exec(SCHEMA);
  return db;
}

/**
 * Writes a group of appends in one transaction. Each is checked against its own expected revision, read
 * inside the transaction so that an earlier append of the group to the same stream counts. IMMEDIATE takes
 * the write lock before reading, so another process cannot read the same revision in between.
 */
export function createWriter(db) {
  const lastRevision = db.prepare('SELECT MAX(revision) FROM events WHERE stream = ?').pluck();
  const insert = db
    .prepare('INSERT INTO events (id, stream, revision, type, data, metadata, created) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING position')
    .pluck();
  const checkpoint = db.prepare(
    'INSERT INTO checkpoints (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position',
  );
  const transaction = db.transaction((batch, created) =>
    batch.map((append) => {
      const current = lastRevision.get(append.streamName) ?? null;
      const actual = current ?? 'no_stream';
      if (append.expected !== 'any' && append.expected !== actual) return { conflict: actual };
      const firstRevision = (current ?? -1) + 1;
      let firstPosition = 0;
      append.rows.forEach((row, i) => {
        const position = insert.get(row.id, append.streamName, firstRevision + i, row.type, row.data, row.metadata, created);
        if (i === 0) firstPosition = position;
      });
      return { firstRevision, firstPosition };
    }),
  );
  return {
    commit: (batch, created) => transaction.immediate(batch, created),
    storeCheckpoint: (name, position) => void checkpoint.run(name, position),
  };
}

/** The last position a group of appends took, when any of them was stored. */
function lastPosition(batch, outcomes) {
  let last = -1;
  outcomes.forEach((outcome, i) => {
    if ('firstPosition' in outcome) last = Math.max(last, outcome.firstPosition + batch[i].rows.length - 1);
  });
  return last;
}

if (!isMainThread && workerData?.role === 'oc-sqlite-event-writer') {
  const db = openDatabase(workerData.filename, workerData.busyTimeoutMs);
  const writer = createWriter(db);
  /** Ports that hear of every commit at once (a projection thread reading the same file), as `{position}`. */
  const listeners = [];
  parentPort.on('message', (message) => {
    if (message.kind === 'close') {
      db.close();
      for (const port of listeners) port.close();
      parentPort.close();
      return;
    }
    try {
      let result;
      if (message.kind === 'commit') {
        result = writer.commit(message.batch, message.created);
        const position = lastPosition(message.batch, result);
        if (position >= 0) for (const port of listeners) port.postMessage(position);
      } else if (message.kind === 'listen') listeners.push(message.port);
      else result = writer.storeCheckpoint(message.name, message.position);
      parentPort.postMessage({ id: message.id, result });
    } catch (error) {
      parentPort.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
    }
  });
}
