import type Database from 'better-sqlite3';

/** A projection commit as the writer takes it: each write names its table. */
export interface TableCommit {
  writes: Array<{ table: string; id: string; position: number; json: string | null }>;
  checkpoints: Readonly<Record<string, number>>;
}

export function openDatabase(filename: string): Database.Database;
export function createWriter(db: Database.Database): { commit(commit: TableCommit): void };
