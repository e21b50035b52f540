import { mkdtempSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { servedByIndex, SqliteReadModelStore, UnindexedQueryError } from '../src/sqlite';
import { UnsupportedQueryError } from '../src/query';
import { readModelContract } from './contract';

const dir = mkdtempSync(join(tmpdir(), 'oc-readmodel-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The contract is about what queries answer; the index check has tests of its own below.
readModelContract('sqlite :memory:', async () => {
  const store = new SqliteReadModelStore({ filename: ':memory:', assertIndexed: false });
  return { store, close: () => store.close() };
});
readModelContract('sqlite file', async () => {
  const store = new SqliteReadModelStore({ filename: join(dir, `${randomUUID()}.sqlite`), assertIndexed: false });
  return { store, close: () => store.close() };
});

describe('sqlite read models', () => {
  const stores: SqliteReadModelStore[] = [];
  const open = (filename = ':memory:') => {
    const store = new SqliteReadModelStore({ filename, assertIndexed: true });
    stores.push(store);
    return store;
  };
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => (s.db.open ? s.close() : undefined)));
  });

  it('refuses a collection that was not declared', async () => {
    await expect(open().collection('nowhere').find({})).rejects.toBeInstanceOf(UnsupportedQueryError);
  });

  it('keeps documents and checkpoints across closing and reopening the file', async () => {
    const filename = join(dir, `${randomUUID()}.sqlite`);
    const first = open(filename);
    await first.declare([{ name: 'videos', indexes: [['org']] }]);
    await first.commit({ writes: [{ collection: 'videos', id: 'v1', position: 3, json: '{"_id":"v1","org":"o"}' }], checkpoints: { p: 3 } });
    await first.close();

    const second = open(filename);
    await second.declare([{ name: 'videos', indexes: [['org']] }]);
    expect(await second.collection('videos').find({ org: 'o' })).toEqual([{ _id: 'v1', org: 'o' }]);
    expect(await second.loadCheckpoint('p')).toBe(3);
  });

  it('refuses a query that would scan the whole collection or sort outside an index', async () => {
    const store = open();
    await store.declare([{ name: 'videos', indexes: [['org', 'created']] }]);
    const videos = store.collection('videos');

    await expect(videos.find({ status: 'queued' })).rejects.toBeInstanceOf(UnindexedQueryError);
    await expect(videos.find({ org: 'o' }, { sort: { status: 1 } })).rejects.toBeInstanceOf(UnindexedQueryError);
    await expect(videos.count({})).rejects.toBeInstanceOf(UnindexedQueryError);
    // An index range, and an index walked in order for one page, are fine.
    await expect(videos.find({ org: 'o', status: 'queued' }, { sort: { created: -1, _id: -1 } })).resolves.toEqual([]);
    await expect(videos.find({}, { sort: { org: 1, created: 1 }, limit: 10 })).resolves.toEqual([]);
    await expect(videos.findOne({ _id: 'v1', status: 'queued' })).resolves.toBeNull();
  });

  it('tells an index range from a scan in a query plan', () => {
    expect(servedByIndex(['SEARCH rm_v USING INDEX ix_v__org (<expr>=?)'], false)).toBe(true);
    expect(servedByIndex(['SCAN rm_v'], true)).toBe(false);
    expect(servedByIndex(['SCAN rm_v USING INDEX ix_v__created'], true)).toBe(true);
    expect(servedByIndex(['SCAN rm_v USING INDEX ix_v__created'], false)).toBe(false);
    expect(servedByIndex(['SEARCH rm_v USING INDEX ix_v__org (<expr>=?)', 'USE TEMP B-TREE FOR ORDER BY'], true)).toBe(false);
    expect(servedByIndex(['SEARCH rm_v USING INDEX ix_v__org (<expr>=?)', 'SCAN json_each VIRTUAL TABLE INDEX 1:'], false)).toBe(true);
  });

  it('drops an index that is no longer declared', async () => {
    const store = open();
    await store.declare([{ name: 'videos', indexes: [['org'], ['status']] }]);
    await store.declare([{ name: 'videos', indexes: [['org']] }]);
    const indexes = store.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ix_%'`).pluck().all();
    expect(indexes).toEqual(['ix_videos__org']);
  });
});
