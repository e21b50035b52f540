import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Document, ReadModelStore } from '../src/port';

interface Video extends Document {
  org: string;
  created: number;
  tags: string[];
  owner: { name: string; team: string };
}

function video(id: string, created: number, overrides: Partial<Video> = {}): Video {
  return { _id: id, org: 'org_1', created, tags: [], owner: { name: 'ada', team: 'red' }, ...overrides };
}

/** The behaviour every ReadModelStore adapter must share. Names are unique per test so a shared server works. */
export function readModelContract(
  name: string,
  open: () => Promise<{ store: ReadModelStore; close(): Promise<void> }>,
): void {
  describe(`ReadModelStore contract: ${name}`, () => {
    let store: ReadModelStore;
    let close: () => Promise<void>;
    const unique = (prefix: string) => `${prefix}_${randomUUID().replaceAll('-', '')}`;
    const videos = () => store.collection<Video>(unique('videos'));

    beforeEach(async () => {
      ({ store, close } = await open());
    });
    afterEach(async () => {
      await close();
    });

    it('pings', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('finds an upserted document and replaces it whole on the next upsert', async () => {
      const collection = videos();
      await collection.upsert(video('v1', 1, { tags: ['a'] }));

      expect(await collection.findOne({ _id: 'v1' })).toEqual(video('v1', 1, { tags: ['a'] }));

      await collection.upsert({ _id: 'v1', org: 'org_2' } as Video);
      expect(await collection.findOne({ _id: 'v1' })).toEqual({ _id: 'v1', org: 'org_2' });
      expect(await collection.count({})).toBe(1);
    });

    it('returns null when nothing matches', async () => {
      expect(await videos().findOne({ _id: 'missing' })).toBeNull();
    });

    it('keeps collections apart', async () => {
      const first = videos();
      const second = videos();
      await first.upsert(video('v1', 1));

      expect(await second.findOne({ _id: 'v1' })).toBeNull();
    });

    describe('filters', () => {
      const ids = (documents: Document[]) => documents.map((d) => d._id).sort();
      let collection: ReturnType<typeof videos>;

      beforeEach(async () => {
        collection = videos();
        await collection.upsert(video('v1', 10, { tags: ['cat', 'dog'], owner: { name: 'ada', team: 'red' } }));
        await collection.upsert(video('v2', 20, { org: 'org_2', tags: ['dog'], owner: { name: 'bob', team: 'blue' } }));
        await collection.upsert(video('v3', 30, { org: 'org_3', tags: [], owner: { name: 'cy', team: 'red' } }));
      });

      it('matches equality and $in', async () => {
        expect(ids(await collection.find({ org: 'org_2' }))).toEqual(['v2']);
        expect(ids(await collection.find({ org: { $in: ['org_1', 'org_3'] } }))).toEqual(['v1', 'v3']);
      });

      it('matches $lt and $gt', async () => {
        expect(ids(await collection.find({ created: { $lt: 20 } }))).toEqual(['v1']);
        expect(ids(await collection.find({ created: { $gt: 10, $lt: 40 } }))).toEqual(['v2', 'v3']);
      });

      it('matches nested fields with dot notation', async () => {
        expect(ids(await collection.find({ 'owner.team': 'red' }))).toEqual(['v1', 'v3']);
      });

      it('matches an array by element and by whole value', async () => {
        expect(ids(await collection.find({ tags: 'dog' }))).toEqual(['v1', 'v2']);
        expect(ids(await collection.find({ tags: ['dog'] }))).toEqual(['v2']);
        expect(ids(await collection.find({ tags: [] }))).toEqual(['v3']);
      });

      it('counts matches', async () => {
        expect(await collection.count({ 'owner.team': 'red' })).toBe(2);
        expect(await collection.count({})).toBe(3);
        expect(await collection.count({ org: 'nobody' })).toBe(0);
      });
    });

    describe('sorting and paging', () => {
      let collection: ReturnType<typeof videos>;

      beforeEach(async () => {
        collection = videos();
        for (const [id, created] of [['a', 1], ['b', 2], ['c', 2], ['d', 3], ['e', 2]] as const) {
          await collection.upsert(video(id, created));
        }
      });

      it('sorts on two keys, the first descending and the second ascending', async () => {
        const sorted = await collection.find({}, { sort: { created: -1, _id: 1 } });
        expect(sorted.map((d) => d._id)).toEqual(['d', 'b', 'c', 'e', 'a']);
      });

      it('skips and limits after sorting', async () => {
        const page = await collection.find({}, { sort: { created: -1, _id: 1 }, skip: 1, limit: 2 });
        expect(page.map((d) => d._id)).toEqual(['b', 'c']);
      });

      it('pages within a filter', async () => {
        const page = await collection.find({ created: 2 }, { sort: { _id: -1 }, limit: 2 });
        expect(page.map((d) => d._id)).toEqual(['e', 'c']);
      });
    });

    it('deletes one document by id, and deleting a missing one is no error', async () => {
      const collection = videos();
      await collection.upsert(video('v1', 1));
      await collection.upsert(video('v2', 2));

      await collection.deleteOne('v1');
      await collection.deleteOne('never-there');

      expect(await collection.findOne({ _id: 'v1' })).toBeNull();
      expect((await collection.find({})).map((d) => d._id)).toEqual(['v2']);
    });

    it('shares no objects with callers', async () => {
      const collection = videos();
      const written = video('v1', 1, { tags: ['a'] });
      await collection.upsert(written);
      written.tags.push('changed-after-upsert');

      const one = await collection.findOne({ _id: 'v1' });
      one!.tags.push('changed-after-findOne');
      one!.owner.name = 'mallory';
      const [many] = await collection.find({});
      many!.org = 'changed-after-find';

      expect(await collection.findOne({ _id: 'v1' })).toEqual(video('v1', 1, { tags: ['a'] }));
    });

    it('loads no checkpoint for an unknown projection, then the last one stored', async () => {
      const projection = unique('projection');
      expect(await store.loadCheckpoint(projection)).toBeUndefined();

      await store.storeCheckpoint(projection, 5);
      await store.storeCheckpoint(unique('other'), 9);
      expect(await store.loadCheckpoint(projection)).toBe(5);

      await store.storeCheckpoint(projection, 7);
      expect(await store.loadCheckpoint(projection)).toBe(7);
    });
  });
}
