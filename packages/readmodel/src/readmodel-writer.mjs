// The SQLite read models' write side, in plain JavaScript so that it can run as a worker thread from the
// sources (tests, tsx) and from a bundle alike: a projection batch's commit then never blocks the event loop.
// `sqlite.ts` uses it in a worker for a file, and in its own thread for `:memory:`.
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/**
 * Opens the file as every connection to it must. `synchronous = NORMAL`: a power loss may take back the
 * last commits, but always with their checkpoint, so the projection re-applies that tail of the log.
 */
export function openDatabase(filename) {
  const db = new Database(filename);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // The writer copies the log back into the file (and fsyncs it) once the log holds this many pages: at the
  // default 1,000 that happened every few dozen commits and tripled a commit's time (measured, decisions.md).
  db.pragma('wal_autocheckpoint = 10000');
  db.exec('CREATE TABLE IF NOT EXISTS _checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL)');
  return db;
}

/**
 * Applies a projection batch and its checkpoints in one transaction. A document is replaced or deleted only
 * by a write newer than it (a greater position), so a replayed event leaves it as it is.
 */
export function createWriter(db) {
  const statements = new Map();
  const statement = (sql) => {
    let prepared = statements.get(sql);
    if (!prepared) statements.set(sql, (prepared = db.prepare(sql)));
    return prepared;
  };
  const upsert = (table) =>
    statement(`INSERT INTO ${table} (_id, _position, doc) VALUES (?, ?, ?)
      ON CONFLICT (_id) DO UPDATE SET _position = excluded._position, doc = excluded.doc WHERE excluded._position > ${table}._position`);
  const remove = (table) => statement(`DELETE FROM ${table} WHERE _id = ? AND _position < ?`);
  const checkpoint = statement(
    'INSERT INTO _checkpoints (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position',
  );
  const transaction = db.transaction(({ writes, checkpoints }) => {
    for (const write of writes) {
      if (write.json === null) remove(write.table).run(write.id, write.position);
      else upsert(write.table).run(write.id, write.position, write.json);
    }
    for (const [name, position] of Object.entries(checkpoints)) checkpoint.run(name, position);
  });
  return { commit: (commit) => transaction(commit) };
}

if (!isMainThread && workerData?.role === 'oc-sqlite-readmodel-writer') {
  const db = openDatabase(workerData.filename);
  const writer = createWriter(db);
  parentPort.on('message', (message) => {
    if (message.kind === 'close') {
      db.close();
      parentPort.close();
      return;
    }
    try {
      parentPort.postMessage({ id: message.id, result: writer.commit(message.commit) });
    } catch (error) {
      parentPort.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
    }
  });
}
