import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { SqliteEventStore } from '@oc/eventstore';
import type { Document, ProjectionCommit } from '../src/port';
import { SqliteReadModelStore } from '../src/sqlite';
import { documentProjection, ProjectionRunner, type Projection, readLatest, readYourWrites } from '../src/projection';

interface Cart extends Document {
  items: string[];
}

const carts = documentProjection<Cart>({
  name: 'carts',
  collection: 'carts',
  canHandle: ['CartOpened', 'ItemAdded', 'CartClosed'],
  documentId: (event) => (event.data as { cartId: string }).cartId,
  evolve(cart, event) {
    const data = event.data as { cartId: string; item?: string };
    switch (event.type) {
      case 'CartOpened':
        return { _id: data.cartId, items: [] };
      case 'ItemAdded':
        return cart && { ...cart, items: [...cart.items, data.item!] };
      case 'CartClosed':
        return null;
      default:
        return cart;
    }
  },
});

/** Not idempotent on purpose: applying an event twice shows in the total. */
function counter(name: string, canHandle = ['Counted']): Projection {
  return {
    name,
    canHandle,
    async handle(_event, ctx) {
      const totals = ctx.collection<Document & { count: number }>('totals');
      const total = await totals.get(name);
      await totals.put({ _id: name, count: (total?.count ?? 0) + 1 });
    },
  };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const runners: ProjectionRunner[] = [];
const eventStores: SqliteEventStore[] = [];
afterEach(async () => {
  await Promise.all(runners.splice(0).map((runner) => runner.stop()));
  await Promise.all(eventStores.splice(0).map((store) => store.close()));
});

function newEventStore(): SqliteEventStore {
  const store = new SqliteEventStore({ filename: ':memory:' });
  eventStores.push(store);
  return store;
}

const collections = [
  { name: 'carts', indexes: [] },
  { name: 'totals', indexes: [] },
];

function given(
  projections: Projection[],
  { eventStore = newEventStore(), readModels = new SqliteReadModelStore({ filename: ':memory:' }), onError = vi.fn() } = {},
) {
  const runner = new ProjectionRunner(eventStore, readModels, projections, { collections, onError });
  runners.push(runner);
  const append = (type: string, data: unknown = {}) =>
    eventStore.appendToStream('stream-1', [{ type, data }], { expectedRevision: 'any' }).then((r) => r.position);
  const total = async (name: string) =>
    (await readModels.collection<Document & { count: number }>('totals').findOne({ _id: name }))?.count ?? 0;
  return { runner, eventStore, readModels, onError, append, total };
}

describe('ProjectionRunner', () => {
  it('catches up with the events appended before start', async () => {
    const { runner, readModels, append } = given([carts]);
    await append('CartOpened', { cartId: 'c1' });
    const last = await append('ItemAdded', { cartId: 'c1', item: 'tea' });

    await runner.start();

    expect(runner.position).toBe(last);
    expect(await readModels.collection('carts').findOne({ _id: 'c1' })).toEqual({ _id: 'c1', items: ['tea'] });
  });

  it('projects events appended after start', async () => {
    const { runner, readModels, append } = given([carts]);
    await runner.start();

    const position = await append('CartOpened', { cartId: 'c1' });
    await runner.waitFor(position);

    expect(await readModels.collection('carts').findOne({ _id: 'c1' })).toEqual({ _id: 'c1', items: [] });
  });

  it('creates, updates and deletes documents through evolve', async () => {
    const { runner, readModels, append } = given([carts]);
    const cart = () => readModels.collection('carts').findOne({ _id: 'c1' });
    await runner.start();

    await runner.waitFor(await append('CartOpened', { cartId: 'c1' }));
    expect(await cart()).toEqual({ _id: 'c1', items: [] });

    await append('ItemAdded', { cartId: 'c1', item: 'tea' });
    await runner.waitFor(await append('ItemAdded', { cartId: 'c1', item: 'milk' }));
    expect(await cart()).toEqual({ _id: 'c1', items: ['tea', 'milk'] });

    await runner.waitFor(await append('CartClosed', { cartId: 'c1' }));
    expect(await cart()).toBeNull();
  });

  it('reads nothing from the store for the event that starts a document, and evolves it from there', async () => {
    const journals = documentProjection<Cart>({
      name: 'journals',
      collection: 'carts',
      canHandle: ['CartOpened', 'ItemAdded'],
      documentId: (event) => (event.data as { cartId: string }).cartId,
      evolve: (cart, event) => {
        const data = event.data as { cartId: string; item?: string };
        return event.type === 'CartOpened' ? { _id: data.cartId, items: [] } : cart && { ...cart, items: [...cart.items, data.item!] };
      },
      startedBy: ['CartOpened'],
    });
    const readModels = new SqliteReadModelStore({ filename: ':memory:' });
    const loaded: string[] = [];
    const loadDocument = readModels.loadDocument.bind(readModels);
    readModels.loadDocument = (collection, id) => (loaded.push(id), loadDocument(collection, id));
    const { runner, append } = given([journals], { readModels });
    await runner.start();

    await runner.waitFor(await append('CartOpened', { cartId: 'c1' }));
    expect(loaded).toEqual([]);
    await runner.waitFor(await append('CartOpened', { cartId: 'c2' }));
    await runner.waitFor(await append('ItemAdded', { cartId: 'c1', item: 'tea' }));

    expect(await readModels.collection('carts').findOne({ _id: 'c1' })).toEqual({ _id: 'c1', items: ['tea'] });
    expect(await readModels.collection('carts').findOne({ _id: 'c2' })).toEqual({ _id: 'c2', items: [] });
    expect(loaded).toEqual([]);
  });

  it('writes nothing for a document made and deleted within one batch, and deletes one stored before', async () => {
    const readModels = new SqliteReadModelStore({ filename: ':memory:' });
    const commits: ProjectionCommit[] = [];
    const commit = readModels.commit.bind(readModels);
    readModels.commit = (c) => (commits.push(c), commit(c));
    const { runner, eventStore, append } = given([carts], { readModels });
    await runner.start();

    await runner.waitFor(await append('CartOpened', { cartId: 'kept' }));
    const both = await eventStore.appendToStream(
      'stream-2',
      [
        { type: 'CartOpened', data: { cartId: 'brief' } },
        { type: 'CartClosed', data: { cartId: 'brief' } },
      ],
      { expectedRevision: 'any' },
    );
    await runner.waitFor(both.position);
    await runner.waitFor(await append('CartClosed', { cartId: 'kept' }));

    const written = commits.flatMap((c) => c.writes.map((w) => `${w.id}:${w.json === null ? 'delete' : 'put'}`));
    expect(written.filter((w) => w.startsWith('brief'))).toEqual([]);
    expect(written.filter((w) => w.startsWith('kept'))).toEqual(['kept:put', 'kept:delete']);
    expect(await readModels.collection('carts').findOne({ _id: 'brief' })).toBeNull();
    expect(await readModels.collection('carts').findOne({ _id: 'kept' })).toBeNull();
  });

  it('resolves waitFor only once the event is projected', async () => {
    const entered = deferred();
    const release = deferred();
    const gated: Projection = {
      ...counter('gated'),
      async handle(event, ctx) {
        entered.resolve();
        await release.promise;
        await counter('gated').handle(event, ctx);
      },
    };
    const { runner, append, total } = given([gated]);
    await runner.start();
    const position = await append('Counted');
    let resolved = false;
    const waiting = runner.waitFor(position).then(() => (resolved = true));

    await entered.promise;
    expect(resolved).toBe(false);

    release.resolve();
    await waiting;
    expect(await total('gated')).toBe(1);
  });

  it('rejects waitFor when the position is not reached in time', async () => {
    const release = deferred();
    const stuck: Projection = { name: 'stuck', canHandle: ['Counted'], handle: () => release.promise };
    const { runner, append } = given([stuck]);
    await runner.start();
    const position = await append('Counted');

    await expect(runner.waitFor(position, 10)).rejects.toThrow(`did not reach position ${position} within 10 ms`);

    release.resolve();
    await runner.waitFor(position);
  });

  it('advances the position for events no projection handles', async () => {
    const { runner, append } = given([carts]);
    await runner.start();

    const position = await append('SomethingElse');

    await runner.waitFor(position);
    expect(runner.position).toBe(position);
  });

  it('re-applies nothing after a restart on a persistent read-model store', async () => {
    const { runner, eventStore, readModels, append, total } = given([counter('count')]);
    await append('Counted');
    await append('Counted');
    await runner.start();
    await runner.stop();
    await append('Counted');

    const restarted = given([counter('count')], { eventStore, readModels }).runner;
    await restarted.start();

    expect(await total('count')).toBe(3);
    expect(await readModels.loadCheckpoint('count')).toBe(3);
  });

  it('catches a new projection up from the beginning while the others skip what they applied', async () => {
    const { runner, eventStore, readModels, append, total } = given([counter('old')]);
    await append('Counted');
    await runner.start();
    await runner.stop();
    await append('Counted');

    const restarted = given([counter('old'), counter('new')], { eventStore, readModels }).runner;
    await restarted.start();

    expect(await total('old')).toBe(2);
    expect(await total('new')).toBe(2);
  });

  it('stops and reports when a projection fails on a live event', async () => {
    const failure = new Error('projection bug');
    const failing: Projection = {
      name: 'failing',
      canHandle: ['Counted', 'Boom'],
      async handle(event, ctx) {
        if (event.type === 'Boom') throw failure;
        await counter('failing').handle(event, ctx);
      },
    };
    const { runner, readModels, onError, append, total } = given([failing]);
    await runner.start();

    const first = await append('Counted');
    await runner.waitFor(first);
    await append('Boom');
    const last = await append('Counted');

    await expect(runner.waitFor(last)).rejects.toBe(failure);
    expect(onError).toHaveBeenCalledExactlyOnceWith(failure);
    expect(runner.position).toBe(first);
    expect(await total('failing')).toBe(1);
    expect(await readModels.loadCheckpoint('failing')).toBe(first);
  });

  it("stores none of a failed batch's documents and does not move its checkpoint", async () => {
    const failure = new Error('projection bug');
    const failing: Projection = {
      name: 'failing',
      canHandle: ['Counted', 'Boom'],
      async handle(event, ctx) {
        if (event.type === 'Boom') throw failure;
        await counter('failing').handle(event, ctx);
      },
    };
    const { runner, readModels, append, total } = given([failing]);
    await append('Counted');
    await append('Boom');

    await expect(runner.start()).rejects.toBe(failure);
    expect(await total('failing')).toBe(0);
    expect(await readModels.loadCheckpoint('failing')).toBeUndefined();
  });

  it('reads only the tail of the log when it starts again', async () => {
    const { runner, eventStore, readModels, append } = given([counter('count')]);
    for (let i = 0; i < 2_500; i++) await append(i % 2 === 0 ? 'Counted' : 'SomethingElse');
    await runner.start();
    await runner.stop();
    const last = await append('SomethingElse');

    const readAll = vi.spyOn(eventStore, 'readAll');
    const restarted = given([counter('count')], { eventStore, readModels }).runner;
    await restarted.start();

    expect(readAll.mock.calls.map(([options]) => options.after)).toEqual([last - 1]);
    expect(restarted.position).toBe(last);
  });

  it('rejects start when a projection fails while catching up, keeping its checkpoint before the failure', async () => {
    const failure = new Error('projection bug');
    const failing: Projection = { name: 'failing', canHandle: ['Boom'], handle: () => Promise.reject(failure) };
    const { runner, readModels, onError, append } = given([failing]);
    const position = await append('Boom');

    await expect(runner.start()).rejects.toBe(failure);
    await expect(runner.waitFor(position)).rejects.toBe(failure);
    expect(onError).not.toHaveBeenCalled();
    expect(await readModels.loadCheckpoint('failing')).toBeUndefined();
  });

  it('lets a query made after a write see it, however far behind the projection was', async () => {
    const entered = deferred();
    const release = deferred();
    const slow: Projection = {
      ...carts,
      async handle(event, ctx) {
        entered.resolve();
        await release.promise;
        await carts.handle(event, ctx);
      },
    };
    const { runner, readModels, append } = given([slow]);
    await runner.start();
    const writer = { lastAppended: await append('CartOpened', { cartId: 'c1' }) };
    await entered.promise;

    let answered = false;
    const query = readYourWrites(readModels, runner, writer)
      .collection('carts')
      .findOne({ _id: 'c1' })
      .then((cart) => ((answered = true), cart));
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);

    release.resolve();
    expect(await query).toEqual({ _id: 'c1', items: [] });
  });

  it("lets a query see another replica's write, which its own event store only hears of by polling", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oc-readlatest-'));
    dirs.push(dir);
    const filename = join(dir, `${randomUUID()}.db`);
    // Two replicas on one log: neither polls on its own within the test (an hour), so only the query's
    // look at the head can bring the other's append to light.
    const mine = new SqliteEventStore({ filename, pollIntervalMs: 3_600_000 });
    const theirs = new SqliteEventStore({ filename, pollIntervalMs: 3_600_000 });
    eventStores.push(mine, theirs);
    const { runner, readModels } = given([carts], { eventStore: mine });
    await runner.start();
    const latest = readLatest(readModels, runner, mine).collection('carts');
    expect(await latest.findOne({ _id: 'c1' })).toBeNull();

    await theirs.appendToStream('cart-c1', [{ type: 'CartOpened', data: { cartId: 'c1' } }], { expectedRevision: 'no_stream' });

    expect(await latest.findOne({ _id: 'c1' })).toEqual({ _id: 'c1', items: [] });
    // readYourWrites waits only for this process's own appends: it answers from the stale read model.
    const own = readYourWrites(readModels, runner, { lastAppended: -1 }).collection('carts');
    await theirs.appendToStream('cart-c2', [{ type: 'CartOpened', data: { cartId: 'c2' } }], { expectedRevision: 'no_stream' });
    expect(await own.findOne({ _id: 'c2' })).toBeNull();
    expect(await latest.findOne({ _id: 'c2' })).toEqual({ _id: 'c2', items: [] });
  });

  it('commits what it applied shortly after, even when no query waits for it', async () => {
    const { runner, readModels, append } = given([carts]);
    await runner.start();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const position = await append('CartOpened', { cartId: 'c1' });
      // The event is applied within a few turns of the event loop (setImmediate is not faked), not committed.
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(runner.position).toBeLessThan(position);
      expect(await readModels.collection('carts').findOne({ _id: 'c1' })).toBeNull();

      await vi.advanceTimersByTimeAsync(10);
      expect(runner.position).toBe(position);
      expect(await readModels.collection('carts').findOne({ _id: 'c1' })).toEqual({ _id: 'c1', items: [] });
    } finally {
      vi.useRealTimers();
    }
  });
});
