import { SqliteCheckpointStore, SqliteEventStore, type StoredEvent } from '@oc/eventstore';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventStoreEventBus, type RetryDelay } from '../src';

describe('EventStoreEventBus', () => {
  let store: SqliteEventStore;
  let checkpoints: SqliteCheckpointStore;
  const stops: Array<() => Promise<void>> = [];

  const setup = (retryDelay: RetryDelay = async () => {}) => {
    store = new SqliteEventStore({ filename: ':memory:' });
    checkpoints = new SqliteCheckpointStore(store);
    return new EventStoreEventBus({ eventStores: { video: store }, checkpoints, retryDelay, onError: () => {} });
  };
  const append = (...types: string[]) =>
    store.appendToStream('video-1', types.map((type) => ({ type, data: { type } })), { expectedRevision: 'any' });
  const consume = async (bus: EventStoreEventBus, handler: (event: StoredEvent) => Promise<void>) => {
    const subscription = await bus.consume('webhooks', { service: 'video', types: ['VideoCreated', 'VideoCompleted'] }, handler);
    stops.push(() => subscription.stop());
    return subscription;
  };

  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    await store.close();
  });

  it('delivers the filtered types and resumes from its checkpoint after a restart', async () => {
    const bus = setup();
    await append('VideoCreated', 'VideoProgressed', 'VideoCompleted');
    const seen: string[] = [];
    const first = await consume(bus, async (event) => void seen.push(`${event.type}@${event.position}`));
    await vi.waitFor(() => expect(seen).toEqual(['VideoCreated@1', 'VideoCompleted@3']));
    await vi.waitFor(async () => expect(await checkpoints.load('webhooks')).toBe(3));
    await first.stop();

    await append('VideoCreated');
    const afterRestart: string[] = [];
    await consume(bus, async (event) => void afterRestart.push(`${event.type}@${event.position}`));
    await vi.waitFor(() => expect(afterRestart).toEqual(['VideoCreated@4']));
  });

  it('retries a failing event with back-off and holds the checkpoint until it succeeds', async () => {
    const attempts: number[] = [];
    let releaseFirstRetry!: () => void;
    const firstRetryWaiting = new Promise<void>((resolve) => {
      releaseFirstRetry = resolve;
    });
    const bus = setup(async (attempt) => {
      attempts.push(attempt);
      if (attempt === 0) await firstRetryWaiting;
    });
    await append('VideoCreated', 'VideoCompleted', 'VideoCreated');
    const calls: number[] = [];
    let failures = 2;
    await consume(bus, async (event) => {
      calls.push(event.position);
      if (event.position === 2 && failures-- > 0) throw new Error('downstream unavailable');
    });

    await vi.waitFor(() => expect(attempts).toEqual([0]));
    expect(calls).toEqual([1, 2]);
    expect(await checkpoints.load('webhooks')).toBeUndefined();

    releaseFirstRetry();
    await vi.waitFor(() => expect(calls).toEqual([1, 2, 2, 2, 3]));
    expect(attempts).toEqual([0, 1]);
    await vi.waitFor(async () => expect(await checkpoints.load('webhooks')).toBe(3));
  });

  it('stops while retrying without skipping: the failed event is delivered after a restart', async () => {
    const bus = setup((_attempt, signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve())));
    await append('VideoCreated');
    const handledAlone = await append('VideoCreated');
    const calls: number[] = [];
    const failing = await consume(bus, async (event) => {
      calls.push(event.position);
      if (event.position > handledAlone.position) throw new Error('still broken');
    });
    await vi.waitFor(async () => expect(await checkpoints.load('webhooks')).toBe(handledAlone.position));
    await append('VideoCompleted', 'VideoCreated');
    await vi.waitFor(() => expect(calls).toContain(handledAlone.position + 1));
    await failing.stop();
    expect(await checkpoints.load('webhooks')).toBe(handledAlone.position);

    // At least once: the failed event comes first after the restart, and nothing after it is skipped.
    const seen: number[] = [];
    await consume(bus, async (event) => void seen.push(event.position));
    await vi.waitFor(() => expect(seen).toEqual([handledAlone.position + 1, handledAlone.position + 2]));
  });

  it('refuses a service it has no event store for', async () => {
    const bus = setup();
    await expect(bus.consume('x', { service: 'billing', types: ['Anything'] }, async () => {})).rejects.toThrow(
      /billing/,
    );
  });

  it('reports how far it is behind the log while its handler holds an event, then zero', async () => {
    const tracing = registerTestTracing();
    try {
      const bus = setup();
      await append('VideoCreated', 'VideoProgressed', 'VideoCompleted');
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const seen: string[] = [];
      await consume(bus, async (event) => {
        await held;
        seen.push(event.type);
      });
      const lag = async () => (await tracing.metrics()).get('oc.eventstore.subscription.lag');

      expect(await lag()).toEqual([{ attributes: { 'oc.subscription.name': 'webhooks' }, value: 3 }]);
      release();
      await vi.waitFor(() => expect(seen).toEqual(['VideoCreated', 'VideoCompleted']));
      await vi.waitFor(async () => expect(await lag()).toEqual([{ attributes: { 'oc.subscription.name': 'webhooks' }, value: 0 }]));
    } finally {
      await tracing.shutdown();
    }
  });
});
