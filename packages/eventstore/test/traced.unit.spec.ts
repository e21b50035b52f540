import { inSpan } from '@oc/telemetry';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandHandler, type Decider } from '../src/decider';
import { type StoredEvent, WrongExpectedRevisionError } from '../src/port';
import { SqliteEventStore } from '../src/sqlite';
import { traceEventStore } from '../src/traced';

const tally: Decider<number, { type: 'Add' }, { type: 'Added'; data: Record<string, never> }> = {
  initialState: () => 0,
  decide: () => [{ type: 'Added', data: {} }],
  evolve: (n) => n + 1,
};

describe('traceEventStore', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let raw: SqliteEventStore;
  beforeEach(() => {
    tracing = registerTestTracing();
    raw = new SqliteEventStore({ filename: ':memory:' });
  });
  afterEach(async () => {
    await raw.close();
    await tracing.shutdown();
  });

  it("makes each append a child of the command's span, named by the stream's category", async () => {
    const store = traceEventStore(raw, { system: 'sqlite' });
    const commands = new CommandHandler(store);
    await inSpan('process video.create', { kind: 'server' }, () => commands.handle('video-abc', tally, { type: 'Add' }));

    const append = tracing.spans().find((s) => s.name === 'append video')!;
    const request = tracing.spans().find((s) => s.name === 'process video.create')!;
    expect(append.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(append.attributes).toMatchObject({
      'db.system.name': 'sqlite',
      'db.operation.name': 'append',
      'db.collection.name': 'video',
      'oc.stream': 'video-abc',
      'oc.event_types': ['Added'],
      'oc.expected_revision': 'no_stream',
      'oc.position': 1,
    });
  });

  it('makes each projection batch a span linking the traces of its events, and measures the lag', async () => {
    const store = traceEventStore(raw, { system: 'sqlite', projections: 'video' });
    const commands = new CommandHandler(store);
    for (const id of ['a', 'b']) await inSpan(`request ${id}`, {}, () => commands.handle(`video-${id}`, tally, { type: 'Add' }));
    const seen: StoredEvent[] = [];
    const subscription = store.subscribeToAll((events) => void seen.push(...events));
    await vi.waitFor(() => expect(seen).toHaveLength(2));
    await subscription.stop();

    const requests = tracing.spans().filter((s) => s.name.startsWith('request ')).map((s) => s.spanContext().traceId);
    const projected = tracing.spans().filter((s) => s.name === 'project video');
    expect(projected.flatMap((s) => s.links.map((l) => l.context.traceId)).sort()).toEqual(requests.sort());
    const lag = (await tracing.metrics()).get('oc.projection.lag')!;
    expect(lag).toEqual([{ attributes: { 'oc.service': 'video' }, value: expect.objectContaining({ count: projected.length }) }]);
  });

  it("measures each append by the stream's category, counts its events, and counts a conflict apart", async () => {
    const store = traceEventStore(raw, { system: 'sqlite' });
    await store.appendToStream('video-abc', [{ type: 'Added', data: {} }, { type: 'Added', data: {} }], { expectedRevision: 'no_stream' });
    await store.appendToStream('account-org_1', [{ type: 'Added', data: {} }], { expectedRevision: 'no_stream' });
    await expect(store.appendToStream('video-abc', [{ type: 'Added', data: {} }], { expectedRevision: 0 })).rejects.toThrow(WrongExpectedRevisionError);

    const metrics = await tracing.metrics();
    const video = { 'db.system.name': 'sqlite', 'db.collection.name': 'video' };
    const account = { 'db.system.name': 'sqlite', 'db.collection.name': 'account' };
    expect(metrics.get('oc.eventstore.append.duration')).toEqual([
      { attributes: video, value: expect.objectContaining({ count: 1 }) },
      { attributes: account, value: expect.objectContaining({ count: 1 }) },
      { attributes: { ...video, 'error.type': 'WrongExpectedRevisionError' }, value: expect.objectContaining({ count: 1 }) },
    ]);
    expect(metrics.get('oc.eventstore.events.appended')).toEqual([
      { attributes: video, value: 2 },
      { attributes: account, value: 1 },
    ]);
    expect(metrics.get('oc.eventstore.append.conflicts')).toEqual([{ attributes: video, value: 1 }]);
    // Each append of this test had its own group commit: nothing else was appended in its turn.
    expect(metrics.get('oc.eventstore.commit.appends')).toEqual([{ attributes: { 'db.system.name': 'sqlite' }, value: expect.objectContaining({ count: 3, sum: 3 }) }]);
  });

  it('writes appends made in one turn in one group commit, and says how many', async () => {
    await Promise.all(['a', 'b', 'c'].map((id) => raw.appendToStream(`video-${id}`, [{ type: 'Added', data: {} }], { expectedRevision: 'no_stream' })));

    const metrics = await tracing.metrics();
    expect(metrics.get('oc.eventstore.commit.appends')).toEqual([{ attributes: { 'db.system.name': 'sqlite' }, value: expect.objectContaining({ count: 1, sum: 3 }) }]);
    expect(metrics.get('oc.eventstore.commit.duration')).toEqual([{ attributes: { 'db.system.name': 'sqlite' }, value: expect.objectContaining({ count: 1 }) }]);
  });
});
