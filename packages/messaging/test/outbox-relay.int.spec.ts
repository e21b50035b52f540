import { jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsNames, ownsStream } from '@oc/contracts';

const { eventsStream: EVENTS_STREAM, eventSubject } = natsNames();
import { SqliteCheckpointStore, SqliteEventStore, type CheckpointStore, type StoredEvent } from '@oc/eventstore';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { JetStreamEventBus, ensureEventsStream, startOutboxRelay, type OutboxRelayOptions } from '../src';
import { registerTestTracing } from '@oc/telemetry/testing';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

describe.skipIf(!(await natsAvailable()))('outbox relay → JetStream → JetStreamEventBus', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let js: JetStreamClient;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    jsm = await jetstreamManager(nc);
    js = jsm.jetstream();
    await ensureEventsStream(jsm);
  });
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await nc?.close();
  });

  /** A fresh service name per test: its subjects, consumers and checkpoints collide with nothing. */
  function fixture() {
    const service = `svc${uniqueSuffix()}`;
    const store = new SqliteEventStore({ filename: ':memory:' });
    const checkpoints = new SqliteCheckpointStore(store);
    cleanups.push(
      () => jsm.streams.purge(EVENTS_STREAM, { filter: eventSubject(service, '>') }),
      () => store.close(),
    );
    const append = (stream: string, ...types: string[]) =>
      store.appendToStream(stream, types.map((type) => ({ type, data: { stream } })), { expectedRevision: 'any' });
    const subjectCounts = async () =>
      (await jsm.streams.info(EVENTS_STREAM, { subjects_filter: eventSubject(service, '>') })).state.subjects ?? {};
    const consume = async (bus: JetStreamEventBus, types: string[], handler: (event: StoredEvent) => Promise<void>) => {
      const name = `test-${service}`;
      const subscription = await bus.consume(name, { service, types }, handler);
      cleanups.push(
        () => jsm.consumers.delete(EVENTS_STREAM, name),
        () => subscription.stop(),
      );
      return subscription;
    };
    const relay = (overrides: Partial<OutboxRelayOptions> = {}) =>
      startOutboxRelay({ service, owns: ownsStream('video'), eventStore: store, checkpoints, js, onError: () => {}, ...overrides });
    return { service, store, checkpoints, append, subjectCounts, consume, relay };
  }

  it('loses nothing and duplicates nothing when the relay dies between publish and checkpoint', async () => {
    const { service, store, checkpoints, append, subjectCounts, consume, relay } = fixture();
    await append('video-1', 'VideoCreated', 'VideoProgressed', 'VideoCompleted');

    // This relay's checkpoints never reach the disk, as if it crashed right after each publish ack.
    const crashing: CheckpointStore = {
      load: (name) => checkpoints.load(name),
      store: async () => {},
    };
    const relayA = await relay({ checkpoints: crashing });
    const received: StoredEvent[] = [];
    await consume(new JetStreamEventBus(nc), ['VideoCreated', 'VideoCompleted'], async (event) => {
      received.push(event);
    });
    await vi.waitFor(async () =>
      expect(await subjectCounts()).toEqual({
        [eventSubject(service, 'VideoCreated')]: 1,
        [eventSubject(service, 'VideoProgressed')]: 1,
        [eventSubject(service, 'VideoCompleted')]: 1,
      }),
    );
    await relayA.stop();
    expect(await checkpoints.load(`outbox-relay.${service}`)).toBeUndefined();

    await append('video-2', 'VideoCreated', 'VideoCompleted');
    const relayB = await relay();
    cleanups.push(() => relayB.stop());
    const all = await store.readAll({ maxCount: 100 });
    await vi.waitFor(async () => expect(await checkpoints.load(`outbox-relay.${service}`)).toBe(all.at(-1)!.position));

    // Relay B republished the three events relay A had already published; JetStream kept one copy of each.
    expect(await subjectCounts()).toEqual({
      [eventSubject(service, 'VideoCreated')]: 2,
      [eventSubject(service, 'VideoProgressed')]: 1,
      [eventSubject(service, 'VideoCompleted')]: 2,
    });
    const wanted = all.filter((event) => event.type !== 'VideoProgressed');
    await vi.waitFor(() => expect(received.map((e) => e.id)).toEqual(wanted.map((e) => e.id)));
    expect(received).toEqual(wanted);
  });

  it('resumes a relay stopped mid-stream without losing or repeating events', async () => {
    const { service, checkpoints, append, subjectCounts, relay } = fixture();
    for (let i = 0; i < 5; i++) await append(`video-${i}`, 'VideoCreated', 'VideoCompleted');

    // NATS goes away after four publishes; the relay keeps retrying the rest until it is stopped.
    let publishes = 0;
    const flaky = {
      publish: (...args: Parameters<JetStreamClient['publish']>) =>
        ++publishes > 4 ? Promise.reject(new Error('connection refused')) : js.publish(...args),
    } as JetStreamClient;
    const relayA = await relay({
      js: flaky,
      retryDelay: (_attempt, signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve())),
    });
    await vi.waitFor(() => expect(publishes).toBeGreaterThan(4));
    await relayA.stop();
    // Its batch never completed, so it never checkpointed: relay B publishes everything again.
    expect(await checkpoints.load(`outbox-relay.${service}`)).toBeUndefined();

    await append('video-late', 'VideoCreated');
    const relayB = await relay();
    cleanups.push(() => relayB.stop());
    await vi.waitFor(async () => expect(await checkpoints.load(`outbox-relay.${service}`)).toBe(11));
    expect(await subjectCounts()).toEqual({
      [eventSubject(service, 'VideoCreated')]: 6,
      [eventSubject(service, 'VideoCompleted')]: 5,
    });
  });

  it('redelivers an event whose handler throws, and continues with the others', async () => {
    const { append, consume, relay } = fixture();
    const relayed = await relay();
    cleanups.push(() => relayed.stop());
    const { position: failing } = await append('video-1', 'VideoCreated');
    await append('video-2', 'VideoCreated');

    const attempts = new Map<number, number>();
    const handled: number[] = [];
    const bus = new JetStreamEventBus(nc, { redeliveryDelayMs: () => 10, onError: () => {} });
    await consume(bus, ['VideoCreated'], async (event) => {
      attempts.set(event.position, (attempts.get(event.position) ?? 0) + 1);
      if (event.position === failing && attempts.get(event.position)! < 3) throw new Error('webhook endpoint down');
      handled.push(event.position);
    });

    await vi.waitFor(() => expect(handled.toSorted()).toEqual([failing, failing + 1]));
    expect(attempts.get(failing)).toBe(3);
    expect(attempts.get(failing + 1)).toBe(1);
  });

  it('keeps its place across consumer restarts: a durable consumer gets only what it has not acked', async () => {
    const { append, consume, relay } = fixture();
    const relayed = await relay();
    cleanups.push(() => relayed.stop());
    await append('video-1', 'VideoCreated');

    const firstRun: number[] = [];
    const first = await consume(new JetStreamEventBus(nc), ['VideoCreated'], async (e) => void firstRun.push(e.position));
    await vi.waitFor(() => expect(firstRun).toEqual([1]));
    await first.stop();

    await append('video-2', 'VideoCreated');
    const secondRun: number[] = [];
    await consume(new JetStreamEventBus(nc), ['VideoCreated'], async (e) => void secondRun.push(e.position));
    await vi.waitFor(() => expect(secondRun).toEqual([2]));
  });

  it('publishes each event once, under its owner, when two services share one store', async () => {
    // As in production, where every service appends to one KurrentDB: the chat relay's log holds the video
    // service's events too. It starts first, so without its filter it would publish them as
    // `events.<chat>.*`, and JetStream, de-duplicating on the event id, would drop the video relay's copies.
    const { service: video, store, checkpoints, append, subjectCounts, consume } = fixture();
    const chat = `${video}chat`;
    cleanups.push(() => jsm.streams.purge(EVENTS_STREAM, { filter: eventSubject(chat, '>') }));
    await append('video-v1', 'VideoQueued', 'VideoCompleted');
    await append('chat-s1', 'ChatSessionStarted', 'ChatExchangeRecorded');
    await append('chat-s2', 'ChatSessionStarted');
    await append('account-o1', 'FundsReserved');
    const last = (await store.readAll({ maxCount: 100 })).at(-1)!.position;

    const chatRelay = await startOutboxRelay({ service: chat, owns: ownsStream('chat'), eventStore: store, checkpoints, js, onError: () => {} });
    cleanups.push(() => chatRelay.stop());
    await vi.waitFor(async () => expect(await checkpoints.load(`outbox-relay.${chat}`)).toBe(last));
    const videoRelay = await startOutboxRelay({ service: video, owns: ownsStream('video'), eventStore: store, checkpoints, js, onError: () => {} });
    cleanups.push(() => videoRelay.stop());
    await vi.waitFor(async () => expect(await checkpoints.load(`outbox-relay.${video}`)).toBe(last));

    expect(await subjectCounts()).toEqual({ [eventSubject(video, 'VideoQueued')]: 1, [eventSubject(video, 'VideoCompleted')]: 1 });
    const chatSubjects = (await jsm.streams.info(EVENTS_STREAM, { subjects_filter: eventSubject(chat, '>') })).state.subjects ?? {};
    expect(chatSubjects).toEqual({
      [eventSubject(chat, 'ChatSessionStarted')]: 2,
      [eventSubject(chat, 'ChatExchangeRecorded')]: 1,
    });
    const received: StoredEvent[] = [];
    await consume(new JetStreamEventBus(nc), ['VideoQueued', 'VideoCompleted'], async (event) => void received.push(event));
    await vi.waitFor(() => expect(received.map((e) => `${e.streamName}/${e.type}`)).toEqual(['video-v1/VideoQueued', 'video-v1/VideoCompleted']));
  });

  it('hands each follower every event from now on, in the stream order, while a shared consumer splits them', async () => {
    const { service, consume } = fixture();
    const publish = (n: number, type = 'VideoCompleted') =>
      js.publish(eventSubject(service, type), JSON.stringify({ id: `e${n}`, type, position: n, data: {}, metadata: {}, streamName: 'video-1', revision: n, created: n }), {
        msgID: `${service}-e${n}`,
      });
    await publish(0);
    const followers: number[][] = [[], []];
    for (const seen of followers) {
      const subscription = await new JetStreamEventBus(nc).follow({ service, types: ['VideoCompleted'] }, (e) => void seen.push(e.position));
      cleanups.push(() => subscription.stop());
    }
    const shared: number[][] = [[], []];
    for (const seen of shared) await consume(new JetStreamEventBus(nc), ['VideoCompleted'], async (e) => void seen.push(e.position));
    for (let n = 1; n <= 30; n++) await publish(n, n % 5 === 0 ? 'VideoProgressed' : 'VideoCompleted');
    const expected = Array.from({ length: 30 }, (_, i) => i + 1).filter((n) => n % 5 !== 0);
    await vi.waitFor(() => expect(followers).toEqual([expected, expected]), { timeout: 10_000, interval: 20 });
    // Replicas of a durable consumer share its messages: each has some, together all (the one before, too).
    await vi.waitFor(() => expect([...shared[0]!, ...shared[1]!].sort((a, b) => a - b)).toEqual([0, ...expected]), { timeout: 10_000, interval: 20 });
  });

  it("reports a durable consumer's pending messages while its handler holds them, then zero", async () => {
    const tracing = registerTestTracing();
    try {
      const { service, append, consume, relay } = fixture();
      await append('video-1', 'VideoCreated', 'VideoCompleted', 'VideoCreated');
      const relaying = await relay();
      cleanups.push(() => relaying.stop());
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const handled: string[] = [];
      await consume(new JetStreamEventBus(nc), ['VideoCreated', 'VideoCompleted'], async (event) => {
        await held;
        handled.push(event.type);
      });
      const pending = async () => (await tracing.metrics()).get('oc.messaging.consumer.pending');
      const attributes = { 'messaging.system': 'nats', 'messaging.destination.name': EVENTS_STREAM, 'messaging.consumer.group.name': `test-${service}` };

      // One in the handler's hand, two waiting behind it.
      await vi.waitFor(async () => expect(await pending()).toEqual([{ attributes, value: 3 }]), { timeout: 10_000, interval: 50 });
      release();
      await vi.waitFor(() => expect(handled).toHaveLength(3), { timeout: 10_000, interval: 20 });
      await vi.waitFor(async () => expect(await pending()).toEqual([{ attributes, value: 0 }]), { timeout: 10_000, interval: 50 });
    } finally {
      await tracing.shutdown();
    }
  });
});
