import { SqliteEventStore } from '@oc/eventstore';
import { type Document, type Projection, ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

const counted: Projection = {
  name: 'counted',
  canHandle: ['Counted'],
  async handle(_event, ctx) {
    const totals = ctx.collection<Document & { count: number }>('totals');
    await totals.put({ _id: 'all', count: ((await totals.get('all'))?.count ?? 0) + 1 });
  },
};

describe("a service's read models", () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let events: SqliteEventStore;
  let readModels: SqliteReadModelStore;
  beforeEach(() => {
    tracing = registerTestTracing();
    events = new SqliteEventStore({ filename: ':memory:' });
    readModels = new SqliteReadModelStore({ filename: ':memory:' });
  });
  afterEach(async () => {
    await events.close();
    await readModels.close();
    await tracing.shutdown();
  });

  it('report how far they are behind the log until they show it, then zero', async () => {
    // Applied batches wait a minute for their commit unless a query waits for them: meanwhile the lag shows.
    const runner = new ProjectionRunner(events, readModels, [counted], { collections: [{ name: 'totals', indexes: [] }], commitDelayMs: 60_000, name: 'projection.video' });
    await runner.start();
    const lag = async () => (await tracing.metrics()).get('oc.eventstore.subscription.lag');
    const appended = await events.appendToStream('video-1', [{ type: 'Counted', data: {} }, { type: 'Counted', data: {} }], { expectedRevision: 'no_stream' });

    expect(await lag()).toEqual([{ attributes: { 'oc.subscription.name': 'projection.video' }, value: 2 }]);
    await runner.waitFor(appended.position);
    await vi.waitFor(async () => expect(await lag()).toEqual([{ attributes: { 'oc.subscription.name': 'projection.video' }, value: 0 }]));
    await runner.stop();
  });
});
