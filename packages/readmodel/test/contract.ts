import { randomUUID } from 'node:crypto';
import { openSqliteStores, type EventStore } from '@oc/eventstore';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Document, ReadModelStore } from '../src/port';
import { type Projection, ProjectionRunner } from '../src/projection';
import { UnsupportedQueryError } from '../src/query';
import { distinctValues } from '../src/pagination';

interface Video extends Document {
  org: string;
  created: number;
  tags: string[];
  owner: { name: string; team: string };
  note?: string | null;
  open?: boolean;
}

function video(id: string, created: number, overrides: Partial<Video> = {}): Video {
  return { _id: id, org: 'org_1', created, tags: [], owner: { name: 'ada', team: 'red' }, ...overrides };
}

/**
 * The behaviour every ReadModelStore adapter must share, including the whole query surface of `query.ts`.
 * Names are unique per test so a shared server works.
 */
export function readModelContract(
  name: string,
  open: () => Promise<{ store: ReadModelStore; close(): Promise<void> }>,
): void {
  describe(`ReadModelStore contract: ${name}`, () => {
    let store: ReadModelStore;
    let close: () => Promise<void>;
    const unique = (prefix: string) => `${prefix}_${randomUUID().replaceAll('-', '')}`;

    /** A declared collection and a way to write documents into it as a projection would. */
    async function videos(indexes: string[][] = [['org', 'created']]) {
      const collectionName = unique('videos');
      await store.declare([{ name: collectionName, indexes }]);
      let position = 0;
      const write = (docs: Array<Video | { delete: string }>, at = ++position) =>
        store.commit({
          writes: docs.map((d) =>
            'delete' in d
              ? { collection: collectionName, id: d.delete as string, position: at, json: null }
              : { collection: collectionName, id: d._id, position: at, json: JSON.stringify(d) },
          ),
          checkpoints: {},
        });
      return { name: collectionName, collection: store.collection<Video>(collectionName), write };
    }

    beforeEach(async () => {
      ({ store, close } = await open());
    });
    afterEach(async () => {
      await close();
    });

    it('pings', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('finds a written document and replaces it whole on a newer write', async () => {
      const { collection, write } = await videos();
      await write([video('v1', 1, { tags: ['a'] })]);

      expect(await collection.findOne({ _id: 'v1' })).toEqual(video('v1', 1, { tags: ['a'] }));

      await write([{ _id: 'v1', org: 'org_2' } as Video]);
      expect(await collection.findOne({ _id: 'v1' })).toEqual({ _id: 'v1', org: 'org_2' });
      expect(await collection.count({})).toBe(1);
    });

    it('returns null when nothing matches', async () => {
      const { collection } = await videos();
      expect(await collection.findOne({ _id: 'missing' })).toBeNull();
    });

    it('keeps collections apart', async () => {
      const first = await videos();
      const second = await videos();
      await first.write([video('v1', 1)]);

      expect(await second.collection.findOne({ _id: 'v1' })).toBeNull();
    });

    it('declares the same collection again without losing documents', async () => {
      const { name: collectionName, collection, write } = await videos();
      await write([video('v1', 1)]);
      await store.declare([{ name: collectionName, indexes: [['org', 'created'], ['owner.team']] }]);
      await store.declare([{ name: collectionName, indexes: [['owner.team']] }]);

      expect(await collection.count({})).toBe(1);
      expect(await collection.count({ 'owner.team': 'red' })).toBe(1);
    });

    describe('the query surface', () => {
      const ids = (documents: Document[]) => documents.map((d) => d._id).sort();
      let collection: Awaited<ReturnType<typeof videos>>['collection'];

      beforeEach(async () => {
        const v = await videos([['org', 'created'], ['owner.team'], ['open']]);
        collection = v.collection;
        await v.write([
          video('v1', 10, { tags: ['cat', 'dog'], owner: { name: 'ada', team: 'red' }, note: 'x', open: true }),
          video('v2', 20, { org: 'org_2', tags: ['dog'], owner: { name: 'bob', team: 'blue' }, note: null, open: false }),
          video('v3', 30, { org: 'org_3', tags: [], owner: { name: 'cy', team: 'red' } }),
        ]);
      });

      it('matches equality on strings, numbers and booleans, and $eq', async () => {
        expect(ids(await collection.find({ org: 'org_2' }))).toEqual(['v2']);
        expect(ids(await collection.find({ created: 30 }))).toEqual(['v3']);
        expect(ids(await collection.find({ open: true }))).toEqual(['v1']);
        expect(ids(await collection.find({ open: false }))).toEqual(['v2']);
        expect(ids(await collection.find({ org: { $eq: 'org_1' } }))).toEqual(['v1']);
      });

      it('matches null to null and to a missing field', async () => {
        expect(ids(await collection.find({ note: null }))).toEqual(['v2', 'v3']);
        expect(ids(await collection.find({ note: { $ne: null } }))).toEqual(['v1']);
      });

      it('matches $ne, and $nin, including documents without the field', async () => {
        expect(ids(await collection.find({ note: { $ne: 'x' } }))).toEqual(['v2', 'v3']);
        expect(ids(await collection.find({ org: { $ne: 'org_1' } }))).toEqual(['v2', 'v3']);
        expect(ids(await collection.find({ note: { $nin: ['x'] } }))).toEqual(['v2', 'v3']);
        expect(ids(await collection.find({ org: { $nin: ['org_1', 'org_3'] } }))).toEqual(['v2']);
        expect(ids(await collection.find({ note: { $nin: ['x', null] } }))).toEqual([]);
      });

      it('matches $in, with null matching a missing field', async () => {
        expect(ids(await collection.find({ org: { $in: ['org_1', 'org_3'] } }))).toEqual(['v1', 'v3']);
        expect(ids(await collection.find({ org: { $in: [] } }))).toEqual([]);
        expect(ids(await collection.find({ note: { $in: ['x', null] } }))).toEqual(['v1', 'v2', 'v3']);
      });

      it('matches $lt, $lte, $gt and $gte, on numbers and on strings', async () => {
        expect(ids(await collection.find({ created: { $lt: 20 } }))).toEqual(['v1']);
        expect(ids(await collection.find({ created: { $lte: 20 } }))).toEqual(['v1', 'v2']);
        expect(ids(await collection.find({ created: { $gt: 10, $lt: 40 } }))).toEqual(['v2', 'v3']);
        expect(ids(await collection.find({ created: { $gte: 30 } }))).toEqual(['v3']);
        expect(ids(await collection.find({ _id: { $gt: 'v1' } }))).toEqual(['v2', 'v3']);
      });

      it('matches nested fields with dot notation', async () => {
        expect(ids(await collection.find({ 'owner.team': 'red' }))).toEqual(['v1', 'v3']);
      });

      it('matches an element of an array with $elemMatch', async () => {
        expect(ids(await collection.find({ tags: { $elemMatch: { $eq: 'dog' } } }))).toEqual(['v1', 'v2']);
        expect(ids(await collection.find({ org: 'org_1', tags: { $elemMatch: { $eq: 'cat' } } }))).toEqual(['v1']);
      });

      it('applies every condition of a filter', async () => {
        expect(ids(await collection.find({ 'owner.team': 'red', created: { $gt: 10 }, org: { $nin: ['org_9'] } }))).toEqual(['v3']);
      });

      it('counts matches', async () => {
        expect(await collection.count({ 'owner.team': 'red' })).toBe(2);
        expect(await collection.count({})).toBe(3);
        expect(await collection.count({ org: 'nobody' })).toBe(0);
      });

      it('refuses anything outside the stated subset', async () => {
        for (const filter of [
          { $or: [{ org: 'org_1' }] },
          { org: { $regex: 'org' } },
          { tags: ['dog'] },
          { owner: { name: 'ada', team: 'red' } },
          { tags: { $elemMatch: { $gt: 'a' } } },
          { created: { $lt: [1] } },
          { 'bad path!': 1 },
        ]) {
          await expect(collection.find(filter), JSON.stringify(filter)).rejects.toBeInstanceOf(UnsupportedQueryError);
        }
        await expect(collection.find({}, { sort: { created: 2 as 1 } })).rejects.toBeInstanceOf(UnsupportedQueryError);
        await expect(collection.find({}, { sort: { created: 1 }, after: [1, 'v1'] })).rejects.toBeInstanceOf(UnsupportedQueryError);
      });
    });

    describe('sorting and keyset pages', () => {
      let collection: Awaited<ReturnType<typeof videos>>['collection'];

      beforeEach(async () => {
        const v = await videos([['created']]);
        collection = v.collection;
        await v.write((
          [['a', 1], ['b', 2], ['c', 2], ['d', 3], ['e', 2]] as const
        ).map(([id, created]) => video(id, created)));
      });

      const order = (docs: Document[]) => docs.map((d) => d._id);

      it('sorts on two keys, the first descending and the second ascending', async () => {
        expect(order(await collection.find({}, { sort: { created: -1, _id: 1 } }))).toEqual(['d', 'b', 'c', 'e', 'a']);
      });

      it('limits after sorting', async () => {
        expect(order(await collection.find({}, { sort: { created: -1, _id: 1 }, limit: 2 }))).toEqual(['d', 'b']);
      });

      it('pages after a key, both keys descending, within a filter', async () => {
        expect(order(await collection.find({}, { sort: { created: -1, _id: -1 }, after: [2, 'e'] }))).toEqual(['c', 'b', 'a']);
        expect(order(await collection.find({ created: 2 }, { sort: { created: -1, _id: -1 }, after: [2, 'e'], limit: 1 }))).toEqual([
          'c',
        ]);
      });

      it('pages after a key, both keys ascending, and with mixed directions', async () => {
        expect(order(await collection.find({}, { sort: { created: 1, _id: 1 }, after: [2, 'b'] }))).toEqual(['c', 'e', 'd']);
        expect(order(await collection.find({}, { sort: { created: -1, _id: 1 }, after: [2, 'c'] }))).toEqual(['e', 'a']);
      });
    });

    it('lists the distinct values of a field within a filter, one index seek each', async () => {
      const v = await videos([['open', 'org']]);
      await v.write([
        video('a', 1, { org: 'org_2', open: true }),
        video('b', 2, { org: 'org_1', open: true }),
        video('c', 3, { org: 'org_2', open: true }),
        video('d', 4, { org: 'org_3', open: false }),
        video('e', 5, { org: 'org_1', open: true }),
      ]);
      expect(await distinctValues(v.collection, 'org', { open: true })).toEqual(['org_1', 'org_2']);
      expect(await distinctValues(v.collection, 'org', { open: false })).toEqual(['org_3']);
    });

    describe('projection writes', () => {
      it('applies a write only when it is newer than the stored document', async () => {
        const { name: collectionName, collection, write } = await videos();
        await write([video('v1', 1, { note: 'at 5' })], 5);
        await write([video('v1', 1, { note: 'at 3' })], 3);
        await write([video('v1', 1, { note: 'at 5 again' })], 5);
        expect((await collection.findOne({ _id: 'v1' }))?.note).toBe('at 5');

        await write([video('v1', 1, { note: 'at 7' })], 7);
        expect((await collection.findOne({ _id: 'v1' }))?.note).toBe('at 7');
        expect(await store.loadDocument(collectionName, 'v1')).toEqual({
          json: JSON.stringify(video('v1', 1, { note: 'at 7' })),
          position: 7,
        });
      });

      it('deletes only for a newer position, and loads nothing for a missing document', async () => {
        const { name: collectionName, collection, write } = await videos();
        await write([video('v1', 1), video('v2', 2)], 5);

        await write([{ delete: 'v1' }], 4);
        expect(await collection.findOne({ _id: 'v1' })).not.toBeNull();
        await write([{ delete: 'v1' }, { delete: 'never-there' }], 6);

        expect(await collection.findOne({ _id: 'v1' })).toBeNull();
        expect(await store.loadDocument(collectionName, 'v1')).toBeNull();
        expect((await collection.find({})).map((d) => d._id)).toEqual(['v2']);
      });

      it('shares no objects with callers', async () => {
        const { collection, write } = await videos();
        await write([video('v1', 1, { tags: ['a'] })]);

        const one = await collection.findOne({ _id: 'v1' });
        one!.tags.push('changed-after-findOne');
        one!.owner.name = 'mallory';
        const [many] = await collection.find({});
        many!.org = 'changed-after-find';

        expect(await collection.findOne({ _id: 'v1' })).toEqual(video('v1', 1, { tags: ['a'] }));
      });

      it('loads no checkpoint for an unknown projection, then the last one committed', async () => {
        const projection = unique('projection');
        expect(await store.loadCheckpoint(projection)).toBeUndefined();

        await store.commit({ writes: [], checkpoints: { [projection]: 5, [unique('other')]: 9 } });
        expect(await store.loadCheckpoint(projection)).toBe(5);

        await store.commit({ writes: [], checkpoints: { [projection]: 7 } });
        expect(await store.loadCheckpoint(projection)).toBe(7);
      });
    });

    describe('replaying events after a lost checkpoint', () => {
      let events: EventStore;
      let closeEvents: () => Promise<void>;
      beforeEach(() => {
        ({ store: events, close: closeEvents } = openSqliteStores(':memory:'));
      });
      afterEach(() => closeEvents());

      /** Balances kept by increments, and one ledger line per credit: what a replay would double. */
      function accounts(collection: string, ledger: string, name: string): Projection {
        return {
          name,
          canHandle: ['Credited'],
          async handle(event, ctx) {
            const { account, amount } = event.data as { account: string; amount: number };
            const balances = ctx.collection<Document & { balance: number }>(collection);
            const current = (await balances.get(account)) ?? { _id: account, balance: 0 };
            current.balance += amount;
            await balances.put(current);
            // A line this event is the first to write: created without reading (as billing's ledger is).
            await ctx.collection(ledger).create({ _id: event.id, account, amount, balance_after: current.balance });
          },
        };
      }

      it('applies nothing twice', async () => {
        const [balances, ledger, name] = [unique('balances'), unique('ledger'), unique('accounts')];
        const collections = [
          { name: balances, indexes: [] },
          { name: ledger, indexes: [['account', 'balance_after']] },
        ];
        const credit = (amount: number) =>
          events.appendToStream('account-a', [{ type: 'Credited', data: { account: 'a', amount } }], { expectedRevision: 'any' });
        const run = async () => {
          const runner = new ProjectionRunner(events, store, [accounts(balances, ledger, name)], { collections, onError: () => {} });
          await runner.start();
          return runner;
        };

        await credit(10);
        const second = await credit(20);
        await credit(30);
        const first = await run();
        await first.stop();
        expect(await store.collection(balances).findOne({ _id: 'a' })).toMatchObject({ balance: 60 });

        // As if the process died after the documents were written but before the checkpoint was.
        await store.commit({ writes: [], checkpoints: { [name]: second.position - 1 } });
        const last = await credit(40);
        const replayed = await run();
        await replayed.waitFor(last.position);
        await replayed.stop();

        expect(await store.collection(balances).findOne({ _id: 'a' })).toMatchObject({ balance: 100 });
        const lines = await store.collection(ledger).find({ account: 'a' }, { sort: { balance_after: 1 } });
        expect(lines.map((l) => l.balance_after)).toEqual([10, 30, 60, 100]);
        expect(await store.loadCheckpoint(name)).toBe(last.position);
      });
    });
  });
}
