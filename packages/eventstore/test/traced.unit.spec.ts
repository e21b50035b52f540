import { inSpan } from '@oc/telemetry';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandHandler, type Decider } from '../src/decider';
import type { StoredEvent } from '../src/port';
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
});
