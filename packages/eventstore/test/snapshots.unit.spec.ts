import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { PART_CHARS, SqliteSnapshotStore } from '../src/snapshots';

/** Long strings, each different (a minute of an account's settled reservations, say). */
const long = (letter: string) => letter.repeat(PART_CHARS + 10);
const snapshot = (revision: number, state: unknown) => ({ revision, eventId: `e${revision}`, version: 1, state });

describe('SqliteSnapshotStore', () => {
  let dir: string;
  let file: string;
  const onError = vi.fn();
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-snapshots-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));
  beforeEach(() => {
    file = join(dir, `snapshots-${crypto.randomUUID()}.sqlite`);
    onError.mockClear();
  });
  /** The long strings the file holds for the stream, as written: each with the key it was written under. */
  const partsInFile = () => {
    const db = new Database(file, { readonly: true });
    try {
      return new Map(db.prepare('SELECT key, text FROM snapshot_parts').all().map((row) => [(row as { text: string }).text, (row as { key: string }).key]));
    } finally {
      db.close();
    }
  };

  it('writes a long string once: later snapshots holding it name what was written, and loads give each state back', () => {
    const store = new SqliteSnapshotStore(file, onError);
    const first = { buckets: [{ minute: 1, chunks: [long('a'), long('b'), 'short'] }], open: [['r1', { amountMicros: 5 }]] };
    store.save('account-1', snapshot(9, first));
    const written = partsInFile();
    expect([...written.keys()]).toEqual(expect.arrayContaining([long('a'), long('b')]));
    expect(written.size).toBe(2);

    const second = { buckets: [{ minute: 1, chunks: [long('a'), long('b'), long('c')] }, { minute: 2, chunks: [long('d')] }], open: [] };
    store.save('account-1', snapshot(19, second));
    const after = partsInFile();
    expect(after.get(long('a'))).toBe(written.get(long('a')));
    expect(after.get(long('b'))).toBe(written.get(long('b')));
    expect(after.size).toBe(4);
    expect(store.load('account-1')).toEqual(snapshot(19, second));

    // A string no snapshot holds any more is gone from the file.
    store.save('account-1', snapshot(29, { buckets: [{ minute: 2, chunks: [long('d')] }] }));
    expect([...partsInFile().keys()]).toEqual([long('d')]);
    store.close();
    const reopened = new SqliteSnapshotStore(file, onError);
    expect(reopened.load('account-1')).toEqual(snapshot(29, { buckets: [{ minute: 2, chunks: [long('d')] }] }));
    reopened.close();
    expect(onError).not.toHaveBeenCalled();
  });

  it('writes every long string again once another process has saved the stream, and keeps the streams apart', () => {
    const one = new SqliteSnapshotStore(file, onError);
    const other = new SqliteSnapshotStore(file, onError);
    one.save('account-1', snapshot(9, { chunks: [long('a')] }));
    one.save('account-2', snapshot(9, { chunks: [long('a')] }));
    other.save('account-1', snapshot(19, { chunks: [long('x')] }));
    one.save('account-1', snapshot(29, { chunks: [long('a'), long('b')] }));
    expect(one.load('account-1')).toEqual(snapshot(29, { chunks: [long('a'), long('b')] }));
    expect(other.load('account-1')).toEqual(snapshot(29, { chunks: [long('a'), long('b')] }));
    expect(other.load('account-2')).toEqual(snapshot(9, { chunks: [long('a')] }));
    one.close();
    other.close();
    expect(onError).not.toHaveBeenCalled();
  });

  it('changes nothing for an older snapshot than the one kept, its long strings included', () => {
    const store = new SqliteSnapshotStore(file, onError);
    store.save('account-1', snapshot(19, { chunks: [long('a')] }));
    store.save('account-1', snapshot(9, { chunks: [long('z')] }));
    expect(store.load('account-1')).toEqual(snapshot(19, { chunks: [long('a')] }));
    expect([...partsInFile().keys()]).toEqual([long('a')]);
    store.close();
  });

  it('ignores a snapshot whose long string the file lost, and says so', () => {
    const store = new SqliteSnapshotStore(file, onError);
    store.save('account-1', snapshot(9, { chunks: [long('a')] }));
    const db = new Database(file);
    db.prepare('DELETE FROM snapshot_parts').run();
    db.close();
    expect(store.load('account-1')).toBeUndefined();
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ message: expect.stringContaining('account-1') }));
    store.close();
  });
});
