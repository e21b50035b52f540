import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, MAX_WEBHOOKS_PER_ORGANIZATION, type Replicas, toApiError } from '@oc/contracts';
import { SqliteEventStore, type StoredEvent, type Subscription } from '@oc/eventstore';
import type { DurableEventBus, EventFilter } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWebhook } from '../src/app';
import { completedVideo, httpReceiver, ManualTimers, type Receiver, TEST_HOSTS, testSettings } from './support';

/** One durable consumer shared by the replicas, as JetStream's is: each event goes to one of them. */
class SharedConsumer implements DurableEventBus {
  private readonly handlers: Array<(event: StoredEvent) => Promise<void>> = [];
  private next = 0;

  async consume(_name: string, filter: EventFilter, handler: (event: StoredEvent) => Promise<void>): Promise<Subscription> {
    // Video events only: the replicas' consumers of billing's events are not exercised here.
    if (filter.service !== 'video') return { stop: async () => {} };
    this.handlers.push(handler);
    return { stop: async () => void this.handlers.splice(this.handlers.indexOf(handler), 1) };
  }

  /** Hands the event to the next replica in turn; resolves once it has been handled (acked). */
  deliver(event: StoredEvent, to?: number): Promise<void> {
    const index = to ?? this.next++ % this.handlers.length;
    return this.handlers[index]!(event);
  }
}

const ORG = 'org_1';

/**
 * Two webhook replicas as two processes would be: each its own connection to one event-store file (not
 * polling it on its own within a test), its own read models and timers, one shared consumer of video events.
 */
describe('webhook replicas on one event store', () => {
  let dir: string;
  let clock: ManualClock;
  let alive: Set<string>;
  let bus: SharedConsumer;
  let writer: SqliteEventStore;
  const closing: Array<() => Promise<void>> = [];
  const receivers: Receiver[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-webhook-replicas-'));
    clock = new ManualClock(Date.now());
    alive = new Set();
    bus = new SharedConsumer();
    writer = new SqliteEventStore({ filename: join(dir, 'events.sqlite'), clock, pollIntervalMs: 3_600_000 });
    closing.push(() => writer.close());
  });
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await rm(dir, { recursive: true, force: true });
  });

  async function replica(name: string) {
    alive.add(name);
    const eventStore = new SqliteEventStore({ filename: join(dir, 'events.sqlite'), clock, pollIntervalMs: 3_600_000 });
    const timers = new ManualTimers(clock);
    const replicas: Replicas = { self: name, shared: true, isGone: async (other) => other !== name && !alive.has(other) };
    let seq = 0;
    const app = await createWebhook({
      eventStore,
      readModels: new SqliteReadModelStore({ filename: join(dir, `read-models-${name}.sqlite`) }),
      bus,
      client: { broadcast: async () => {} },
      clock,
      ids: { next: (prefix) => `${prefix}${name}_${++seq}` },
      logger: pino({ level: 'silent' }),
      settings: testSettings(),
      version: '0.1.0',
      timers,
      resolveHost: async (host) => TEST_HOSTS[host] ?? [],
      replicas,
    });
    let stopped = false;
    const close = async () => {
      if (stopped) return;
      stopped = true;
      await app.close();
      await eventStore.close();
    };
    closing.push(close);
    return {
      app,
      timers,
      /** SIGKILL, as far as the others can tell: it stops answering presence, consuming and attempting. */
      async kill() {
        alive.delete(name);
        await close();
      },
    };
  }

  async function videoEvent(videoId: string): Promise<StoredEvent> {
    const stream = `video-${videoId}`;
    const data = { org_id: ORG, video: completedVideo({ id: videoId }) };
    await writer.appendToStream(stream, [{ type: 'VideoCompleted', data }], { expectedRevision: 'no_stream' });
    return (await writer.readStream(stream))[0]!;
  }

  const receiver = async (respond?: Parameters<typeof httpReceiver>[0]) => {
    const r = await httpReceiver(respond);
    receivers.push(r);
    return r;
  };

  it('lets no more than the limit of webhooks through when creates race on both replicas', async () => {
    const [a, b] = [await replica('webhook-a'), await replica('webhook-b')];
    const target = await receiver();
    const creates = Array.from({ length: MAX_WEBHOOKS_PER_ORGANIZATION + 10 }, (_, i) =>
      (i % 2 ? a : b).app.service.create({ org_id: ORG, url: target.url, events: ['video.completed'] }).then(
        (hook) => hook.id,
        (error: unknown) => toApiError(error).code,
      ),
    );
    const outcomes = await Promise.all(creates);
    expect(outcomes.filter((o) => o.startsWith('wh_'))).toHaveLength(MAX_WEBHOOKS_PER_ORGANIZATION);
    expect(outcomes.filter((o) => o === 'webhook_limit_reached')).toHaveLength(10);
    // Each replica lists all twenty at once, whichever created them.
    expect((await a.app.service.list({ org_id: ORG })).data).toHaveLength(MAX_WEBHOOKS_PER_ORGANIZATION);
    expect((await b.app.service.list({ org_id: ORG })).data).toHaveLength(MAX_WEBHOOKS_PER_ORGANIZATION);

    // A delete on one replica frees a place that a create on the other can take.
    await a.app.service.delete({ org_id: ORG, webhook_id: outcomes.find((o) => o.startsWith('wh_'))! });
    await expect(b.app.service.create({ org_id: ORG, url: target.url, events: ['video.completed'] })).resolves.toMatchObject({ object: 'webhook' });
    const refused = await a.app.service.create({ org_id: ORG, url: target.url, events: ['video.completed'] }).catch(toApiError);
    expect(refused).toMatchObject({ status: 400, code: 'webhook_limit_reached' });
  });

  it('makes each attempt once, and the replica left finishes the deliveries of a killed one', async () => {
    const [a, b] = [await replica('webhook-a'), await replica('webhook-b')];
    let calls = 0;
    // The receiver fails the first attempt of each event, then succeeds.
    const seen = new Map<string, number>();
    const flaky = await receiver((req, res) => {
      calls++;
      const id = String(req.headers['x-service-event-id']);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      res.writeHead(seen.get(id) === 1 ? 500 : 204).end();
    });
    await a.app.service.create({ org_id: ORG, url: flaky.url, events: ['video.completed'] });
    // One event to each replica (round robin, like the shared consumer): each schedules and makes attempt 1.
    await bus.deliver(await videoEvent('video_1'), 0);
    await bus.deliver(await videoEvent('video_2'), 1);
    await vi.waitFor(() => expect(calls).toBe(2), { timeout: 5_000, interval: 5 });

    // webhook-a is killed between attempts; webhook-b takes its delivery over and makes attempt 2.
    await a.kill();
    expect(await b.app.deliveries.takeOverFromGoneReplicas()).toBe(1);
    await vi.waitFor(
      () => {
        b.timers.advance(1_000);
        expect(calls).toBe(4);
      },
      { timeout: 5_000, interval: 10 },
    );
    expect([...seen.values()]).toEqual([2, 2]);
    const attempts = flaky.received.map((r) => [String(r.headers['x-service-event-id']).slice(-8), r.headers['x-service-delivery-attempt']]);
    expect(attempts.map(([, n]) => n).sort()).toEqual(['1', '1', '2', '2']);
    // Nothing more is sent: every delivery succeeded, and the killed replica's schedule died with it.
    b.timers.advance(60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toBe(4);
  });

  it('does not take over the deliveries of a replica that is alive', async () => {
    const [a, b] = [await replica('webhook-a'), await replica('webhook-b')];
    const failing = await receiver((_req, res) => void res.writeHead(500).end());
    await a.app.service.create({ org_id: ORG, url: failing.url, events: ['video.completed'] });
    await bus.deliver(await videoEvent('video_1'), 0);
    await vi.waitFor(() => expect(failing.received).toHaveLength(1), { timeout: 5_000, interval: 5 });
    expect(await b.app.deliveries.takeOverFromGoneReplicas()).toBe(0);
    // The same event redelivered to the other replica (its ack was lost) is not a second delivery.
    await bus.deliver((await writer.readStream('video-video_1'))[0]!, 1);
    b.timers.advance(1_000);
    a.timers.advance(0);
    await vi.waitFor(() => expect(failing.received).toHaveLength(2), { timeout: 5_000, interval: 5 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(failing.received.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2']);
  });
});
