import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '@oc/eventstore';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Document } from '../src/port';
import { type Projector, readLatest } from '../src/projection';
import { type ProjectionWishes, type ProjectorLease, sharedProjection } from '../src/shared';
import { SqliteReadModelStore } from '../src/sqlite';

const dir = mkdtempSync(join(tmpdir(), 'oc-shared-projection-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Total = Document & { total: number };

/** A lease the test hands out itself: `grant` starts a replica's projecting, `revoke` stops it. */
function handLeases() {
  const works = new Map<string, { start: () => Promise<{ stop(): Promise<void> }>; running?: Promise<{ stop(): Promise<void> }> }>();
  const revoke = async (replica: string) => {
    const work = works.get(replica);
    const running = work?.running;
    if (work) work.running = undefined;
    await (await running)?.stop();
  };
  return {
    lease:
      (replica: string): ProjectorLease =>
      (start) => {
        works.set(replica, { start });
        return { stop: () => revoke(replica) };
      },
    async grant(replica: string) {
      const work = works.get(replica)!;
      work.running = work.start();
      await work.running;
    },
    revoke,
  };
}

/** Wishes between replicas as NATS carries them: every listener hears every wish. */
function wishBus(): ProjectionWishes {
  const listeners = new Set<(position: number) => void>();
  return {
    tell: (position) => listeners.forEach((listener) => listener(position)),
    hear(listener) {
      listeners.add(listener);
      return { close: () => listeners.delete(listener) };
    },
  };
}

describe('read models projected once into a store every replica reads', () => {
  let n = 0;
  let eventsFile: string;
  let readModelFile: string;
  let leases: ReturnType<typeof handLeases>;
  let wishes: ProjectionWishes;
  const replicas: Array<{ events: SqliteEventStore; queries: SqliteReadModelStore; projector: Projector }> = [];
  /** Positions each replica's projection applied. */
  let applied: { a: number[]; b: number[] };

  beforeEach(() => {
    n++;
    eventsFile = join(dir, `events-${n}.sqlite`);
    readModelFile = join(dir, `read-models-${n}.sqlite`);
    leases = handLeases();
    wishes = wishBus();
    applied = { a: [], b: [] };
  });
  afterEach(async () => {
    for (const { events, queries, projector } of replicas.splice(0)) {
      await projector.stop();
      await queries.close();
      await events.close();
    }
  });

  /** A replica as a process runs it: its own connections to the event log and to the shared read-model file. */
  const replica = async (name: 'a' | 'b') => {
    const events = new SqliteEventStore({ filename: eventsFile });
    const queries = new SqliteReadModelStore({ filename: readModelFile, writes: 'none' });
    const factory = sharedProjection({
      lease: leases.lease(name),
      wishes,
      openWriter: () => {
        const store = new SqliteReadModelStore({ filename: readModelFile });
        return { store, close: () => store.close() };
      },
    });
    const projector = factory({
      service: 'totals',
      set: {
        collections: [{ name: 'totals', indexes: [] }],
        projections: [
          {
            name: 'totals',
            canHandle: ['Credited'],
            async handle(event, ctx) {
              applied[name].push(event.position);
              const { account, amount } = event.data as { account: string; amount: number };
              const totals = ctx.collection<Total>('totals');
              const current = (await totals.get(account)) ?? { _id: account, total: 0 };
              await totals.put({ ...current, total: current.total + amount });
            },
          },
        ],
      },
      eventStore: events,
      readModels: queries,
      onError: (error) => expect.unreachable(String(error)),
    });
    await projector.start();
    const models = readLatest(queries, projector, events);
    const entry = { events, queries, projector };
    replicas.push(entry);
    return {
      credit: async (account: string, amount: number) =>
        (await events.appendToStream(`account-${account}`, [{ type: 'Credited', data: { account, amount } }], { expectedRevision: 'any' })).position,
      // No wait of the test's own: the query waits until the shared file shows the log as it stood.
      total: async (account: string) => (await models.collection<Total>('totals').findOne({ _id: account }))?.total,
    };
  };

  it('only the lease holder projects; the other replica reads its writes at once from the shared file', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await leases.grant('a');
    let sum = 0;
    for (let i = 1; i <= 10; i++) {
      sum += i;
      // Written through the replica that does not project, read back through it and through the other one.
      await b.credit('acme', i);
      expect(await b.total('acme')).toBe(sum);
      await a.credit('acme', 1);
      sum += 1;
      expect(await b.total('acme')).toBe(sum);
      expect(await a.total('acme')).toBe(sum);
    }
    expect(applied.b).toEqual([]);
    expect(applied.a).toHaveLength(20);
  });

  it('a new holder continues from the shared checkpoint, applying nothing twice', async () => {
    const a = await replica('a');
    const b = await replica('b');
    await leases.grant('a');
    for (let i = 0; i < 5; i++) await a.credit('acme', 10);
    expect(await b.total('acme')).toBe(50);
    await leases.revoke('a');

    for (let i = 0; i < 5; i++) await a.credit('acme', 1);
    await leases.grant('b');
    expect(await a.total('acme')).toBe(55);
    expect(await b.total('acme')).toBe(55);
    expect(applied.a).toHaveLength(5);
    expect(applied.b).toHaveLength(5);
    expect(Math.min(...applied.b)).toBeGreaterThan(Math.max(...applied.a));
  });

  it('a replica started while another holds the lease waits for the shared file at start, projecting nothing', async () => {
    const a = await replica('a');
    await leases.grant('a');
    for (let i = 0; i < 3; i++) await a.credit('acme', 2);
    const b = await replica('b');
    expect(await b.total('acme')).toBe(6);
    expect(applied.b).toEqual([]);
  });
});
