import type Database from 'better-sqlite3';
import type { ExpectedRevision } from './port';

/** An append as the writer takes it: its events already serialized. */
export interface PendingRows {
  streamName: string;
  rows: Array<{ id: string; type: string; data: string; metadata: string }>;
  expected: ExpectedRevision;
}

/** Where an append's events went (consecutive revisions and positions), or the revision that refused it. */
export type CommitOutcome = { firstRevision: number; firstPosition: number } | { conflict: number | 'no_stream' };

export interface Writer {
  commit(batch: PendingRows[], created: number): CommitOutcome[];
  storeCheckpoint(name: string, position: number): void;
}

export function openDatabase(filename: string, busyTimeoutMs: number): Database.Database;
export function createWriter(db: Database.Database): Writer;
