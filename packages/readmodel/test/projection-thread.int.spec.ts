import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStores, type SqliteEventStore } from '@oc/eventstore';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ProjectionThread, startProjectionThread } from '../src/projection-thread';
import { readYourWrites } from '../src/projection';
import { SqliteReadModelStore } from '../src/sqlite';

const dir = mkdtempSync(join(tmpdir(), 'oc-projection-thread-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const entry = new URL('./fixtures/projection-thread-entry.ts', import.meta.url);
const set = { projections: [], collections: [{ name: 'totals', indexes: [] }] };

describe('projections in a thread of their own', () => {
  let events: SqliteEventStore;
  let closeEvents: () => Promise<void>;
  let eventsFile: string;
  let readModelFile: string;
  let queries: SqliteReadModelStore;
  let thread: ProjectionThread | undefined;
  let lost: unknown[];
  let n = 0;

  beforeEach(() => {
    n++;
    eventsFile = join(dir, `events-${n}.sqlite`);
    readModelFile = join(dir, `totals-${n}.sqlite`);
    ({ store: events, close: closeEvents } = openSqliteStores({ filename: eventsFile }));
    queries = new SqliteReadModelStore({ filename: readModelFile, writes: 'none' });
    lost = [];
  });
  afterEach(async () => {
    await thread?.close();
    thread = undefined;
    await queries.close();
    await closeEvents();
  });

  const start = async () => {
    thread = await startProjectionThread({ entry, eventStore: events, eventsFile, readModelFiles: { totals: readModelFile }, onLost: (e) => lost.push(e) });
    const projector = thread.projector({ service: 'totals', set, eventStore: events, readModels: queries, onError: () => {} });
    await projector.start();
    return projector;
  };
  const credit = (account: string, amount: number) =>
    events.appendToStream(`account-${account}`, [{ type: 'Credited', data: { account, amount } }], { expectedRevision: 'any' });

  it('shows a write to the thread that made it as soon as it asks (read-your-writes)', async () => {
    const projector = await start();
    const writer = { lastAppended: -1 };
    const models = readYourWrites(queries, projector, writer);
    for (let i = 1; i <= 20; i++) {
      writer.lastAppended = (await credit('a', i)).position;
      // No wait of our own: the query itself waits until the thread shows the append.
      expect(await models.collection<{ _id: string; total: number }>('totals').findOne({ _id: 'a' })).toMatchObject({ total: (i * (i + 1)) / 2 });
    }
  });

  it('resumes from its checkpoint after a restart, applying nothing twice', async () => {
    const credited = await credit('a', 10);
    const first = await start();
    await first.waitFor(credited.position);
    await thread!.close();
    thread = undefined;

    const again = await credit('a', 5);
    const second = await start();
    await second.waitFor(again.position);
    expect(await queries.collection('totals').findOne({ _id: 'a' })).toMatchObject({ total: 15 });
  });

  it('fails the waits of a projection that stopped on an error, rather than letting them time out', async () => {
    const projector = await start();
    const poisoned = await events.appendToStream('account-p', [{ type: 'Poison', data: {} }], { expectedRevision: 'any' });
    await expect(projector.waitFor(poisoned.position, 10_000)).rejects.toThrow('poisoned projection');
    expect(lost).toEqual([]);
  });
});
