import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsNames, ownsStream } from '@oc/contracts';
import { SqliteCheckpointStore, SqliteEventStore } from '@oc/eventstore';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ensureEventsStream, jetStreamLeaseStore, natsPresence, runLeased, startOutboxRelay } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

const { eventsStream: EVENTS_STREAM, eventSubject, leasesStream: LEASES_STREAM, lease: leaseSubject } = natsNames();
const LEASE = { leaseMs: 1_500, renewMs: 200, marginMs: 500 };

/**
 * A TCP hop between a client and NATS that can go silent both ways without closing anything, as a network
 * partition does: neither side hears of it until its own timeouts.
 */
async function partitionableHop(target: URL): Promise<{ url: string; partition(): void; close(): void }> {
  const sockets = new Set<Socket>();
  let partitioned = false;
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
    }
    client.on('data', (data) => void (partitioned || upstream.write(data)));
    upstream.on('data', (data) => void (partitioned || client.write(data)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${port}`,
    partition: () => void (partitioned = true),
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe.skipIf(!(await natsAvailable()))('one outbox relay per service, under a lease in JetStream', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const cleanups: Array<() => unknown> = [];

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    jsm = await jetstreamManager(nc);
    await ensureEventsStream(jsm);
  });
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
    await nc?.close();
  });

  /** A fresh service on one event store, whose replicas each run a relay only while they hold its lease. */
  function fixture() {
    const service = `svc${uniqueSuffix()}`;
    const store = new SqliteEventStore({ filename: ':memory:' });
    const checkpoints = new SqliteCheckpointStore(store);
    cleanups.push(
      () => jsm.streams.purge(EVENTS_STREAM, { filter: eventSubject(service, '>') }),
      () => jsm.streams.purge(LEASES_STREAM, { filter: leaseSubject(`relay.${service}`) }),
      () => store.close(),
    );
    let appended = 0;
    const append = async (count: number) => {
      for (let i = 0; i < count; i++) {
        await store.appendToStream(`video-${++appended}`, [{ type: 'VideoQueued', data: {} }], { expectedRevision: 'any' });
      }
    };
    /** The copies JetStream keeps of the service's events. */
    const inJetStream = async () =>
      (await jsm.streams.info(EVENTS_STREAM, { subjects_filter: eventSubject(service, '>') })).state.subjects?.[eventSubject(service, 'VideoQueued')] ?? 0;
    const timeline: string[] = [];
    /** A replica on a connection of its own; `publishes` counts what its relay sent. */
    const replica = async (self: string, url = NATS_URL) => {
      const connection = await connect({ servers: url, reconnect: false });
      cleanups.push(() => connection.close());
      const presence = await natsPresence(connection, { service, self, timeoutMs: 200 });
      const js = jetstream(connection);
      const counted = { publishes: 0 };
      const countingJs = {
        publish: (...args: Parameters<JetStreamClient['publish']>) => {
          counted.publishes++;
          return js.publish(...args);
        },
      } as JetStreamClient;
      const lease = runLeased({
        ...LEASE,
        leases: await jetStreamLeaseStore(connection, { timeoutMs: 300 }),
        key: `relay.${service}`,
        replicas: presence,
        start: () => startOutboxRelay({ service, owns: ownsStream('video'), eventStore: store, checkpoints, js: countingJs, onError: () => {} }),
        onHeld: (held) => timeline.push(`${self} ${held ? 'took' : 'gave up'}`),
      });
      cleanups.push(() => lease.stop());
      return { connection, counted, lease };
    };
    const leaseRevision = async () => (await (await jetStreamLeaseStore(nc)).read(`relay.${service}`))?.revision ?? 0;
    return { service, append, inJetStream, timeline, replica, leaseRevision };
  }

  it('publishes each event once while two replicas run', async () => {
    const { append, inJetStream, timeline, replica, leaseRevision } = fixture();
    const first = await replica('video-1');
    await vi.waitFor(() => expect(timeline).toEqual(['video-1 took']));
    const second = await replica('video-2');
    for (let round = 0; round < 5; round++) {
      await append(4);
      // Renewals apart: the steady state, not the start.
      const renewed = await leaseRevision();
      await vi.waitFor(async () => expect(await leaseRevision()).toBeGreaterThan(renewed));
    }
    await vi.waitFor(async () => expect(await inJetStream()).toBe(20));
    expect(first.counted.publishes).toBe(20);
    expect(second.counted.publishes).toBe(0);
    expect(timeline).toEqual(['video-1 took']);
  });

  it('hands the relay over within the lease once its holder dies, and loses nothing', async () => {
    const { append, inJetStream, timeline, replica } = fixture();
    const first = await replica('video-1');
    await vi.waitFor(() => expect(timeline).toEqual(['video-1 took']));
    const second = await replica('video-2');
    await append(5);
    await vi.waitFor(async () => expect(await inJetStream()).toBe(5));

    // The process dies: its connection goes, with its presence, and it renews nothing from now on.
    await first.connection.close();
    const died = performance.now();
    await append(5);
    await vi.waitFor(() => expect(timeline).toContain('video-2 took'), { timeout: LEASE.leaseMs * 2 });
    expect(performance.now() - died).toBeLessThan(LEASE.leaseMs);
    await vi.waitFor(async () => expect(await inJetStream()).toBe(10));
    expect(second.counted.publishes).toBeGreaterThanOrEqual(5);
  });

  it('stops the relay of a holder cut off from NATS before another replica starts its own', async () => {
    const { append, inJetStream, timeline, replica } = fixture();
    const hop = await partitionableHop(new URL(NATS_URL));
    cleanups.push(() => hop.close());
    const first = await replica('video-1', hop.url);
    await vi.waitFor(() => expect(timeline).toEqual(['video-1 took']));
    await replica('video-2');
    await append(3);
    await vi.waitFor(async () => expect(await inJetStream()).toBe(3));

    // To NATS its connection, and so its presence, stays open: the other replica can only wait the lease out.
    hop.partition();
    await append(3);
    await vi.waitFor(() => expect(timeline).toEqual(['video-1 took', 'video-1 gave up', 'video-2 took']), { timeout: LEASE.leaseMs * 3 });
    await vi.waitFor(async () => expect(await inJetStream()).toBe(6));
    // Its relay was stopped: events appended from now on are not even tried by it.
    const tried = first.counted.publishes;
    await append(3);
    await vi.waitFor(async () => expect(await inJetStream()).toBe(9));
    expect(first.counted.publishes).toBe(tried);
  });
});
