import { existsSync, renameSync } from 'node:fs';
import type Database from 'better-sqlite3';

/** What SQLite says of a file that is not a database, or one whose pages do not hold together. */
export function isCorruptionError(error: unknown): error is Error & { code: string } {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT'));
}

/** How a process stops on a corrupt event log: sysexits' EX_DATAERR. */
export const EXIT_CORRUPT_LOG = 65;

/**
 * The event log is the source of truth: a corrupt one stops the start (nothing could be rebuilt from it), said
 * in one line for the operator, without a stack trace.
 */
export class EventLogCorruptError extends Error {
  constructor(filename: string, reason: string) {
    super(
      `The event log ${filename} is corrupt (${reason}); nothing was started. It is the source of truth: restore it ` +
        'from a backup (the snapshots and read models beside it are caches, rebuilt from it at the next start).',
    );
    this.name = 'EventLogCorruptError';
  }
}

/**
 * Opens a SQLite file that can be rebuilt from the event log (snapshots, read models). One that is not a
 * database, or fails SQLite's quick check, is moved aside to `<file>.corrupt-<time>` (with its -wal and -shm,
 * kept for a look) and made anew, empty, with one warning: its owner then refills it from the log, so a broken
 * cache never stops a start.
 */
export function openRebuildable(
  filename: string,
  open: (filename: string) => Database.Database,
  warn: (message: string) => void,
  now: () => number = Date.now,
): Database.Database {
  if (filename === ':memory:') return open(filename);
  let problem: string;
  let db: Database.Database | undefined;
  try {
    db = open(filename);
    const verdict = db.pragma('quick_check', { simple: true });
    if (verdict === 'ok') return db;
    problem = String(verdict);
  } catch (error) {
    if (!isCorruptionError(error)) throw error;
    problem = error.message;
  }
  db?.close();
  const aside = `${filename}.corrupt-${new Date(now()).toISOString().replace(/[:.]/g, '-')}`;
  for (const suffix of ['', '-wal', '-shm']) {
    if (existsSync(filename + suffix)) renameSync(filename + suffix, aside + suffix);
  }
  warn(`${filename} was corrupt (${problem}): moved to ${aside} and rebuilt from the event log`);
  return open(filename);
}
