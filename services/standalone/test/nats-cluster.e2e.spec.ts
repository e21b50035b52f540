import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsNames } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService } from './harness';
import { moneyBooks } from './money';
import { type NatsCluster, natsCluster, natsServerInstalled } from './nats';

/**
 * Every service over a three-node NATS cluster (servers of its own, on loopback) whose streams are kept by all
 * three (NATS_STREAM_REPLICAS=3): the node leading the events stream is killed (SIGKILL) in the middle of a mixed
 * load. The clients reconnect to the other two, JetStream elects another leader, and the customer sees nothing
 * of it in the books: every reservation settled once, every charge a usage, every video's webhook delivered, one
 * video per Idempotency-Key, and each event once in the stream.
 */
describe.skipIf(!natsServerInstalled())('a NATS node killed under load (three-node cluster, R3 streams)', () => {
  let cluster: NatsCluster;
  let service: RunningService;
  let receiver: Receiver;

  beforeAll(async () => {
    cluster = await natsCluster(3);
    receiver = await httpReceiver();
    service = await distributed({
      NATS_URL: cluster.urls,
      NATS_STREAM_REPLICAS: '3',
      SIM_VIDEO_DURATION_MS: '1500',
      CHAT_SIMULATOR_WORD_DELAY_MS: '2',
      WEBHOOK_MODE: 'development',
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_DELAYS_MS: '0,200,500,1000',
    });
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
    await cluster?.stop();
  });

  it('keeps the books exact and delivers every webhook when the events stream leader dies mid-load', async () => {
    const nc = await connect({ servers: cluster.urls.split(',') });
    const jsm = await jetstreamManager(nc);
    const { eventsStream, leasesStream } = natsNames(service.natsPrefix);
    for (const stream of [eventsStream, leasesStream]) expect((await jsm.streams.info(stream)).config.num_replicas, stream).toBe(3);

    const api = clientFor(service);
    const { customer, mixedLoad, watchBalance, expectBooksBalance } = moneyBooks(service, api, receiver);
    const c = await customer();
    const watch = watchBalance(c.orgId);
    let killed: { name: string; at: number } | undefined;
    const started = performance.now();
    const killLeader = async () => {
      const leader = (await jsm.streams.info(eventsStream)).cluster?.leader;
      const node = cluster.nodes.find((n) => n.name === leader) ?? cluster.nodes[0]!;
      await node.kill();
      killed = { name: node.name, at: performance.now() - started };
    };
    const load = await mixedLoad(c.key, 200, 50, killLeader, { twiceWithKey: true });
    const loadMs = performance.now() - started;
    const seen = await watch.stop();

    expect(killed).toBeDefined();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    // What the node's loss cut short was a 503 the client may retry, never a 500.
    expect(load.statuses[500]).toBeUndefined();
    expect(load.duplicates).toEqual([]);
    expect(load.videos.size).toBeGreaterThan(0);
    expect(load.chats.size).toBeGreaterThan(0);
    const { ledger, finals } = await expectBooksBalance(c, load);

    // Another node leads the stream now, and each event is in it once (the relay's republishes were dropped by id).
    const info = await jsm.streams.info(eventsStream);
    expect(info.cluster?.leader).toBeDefined();
    expect(info.cluster?.leader).not.toBe(killed!.name);
    // Read message by message from the leader: a consumer made now may be placed on the dead node and never answer.
    const ids: string[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq += 50) {
      const batch = Array.from({ length: Math.min(50, info.state.last_seq - seq + 1) }, (_, i) => jsm.streams.getMessage(eventsStream, { seq: seq + i }));
      for (const message of await Promise.all(batch)) ids.push(message!.json<{ id: string }>().id);
    }
    expect(ids.length).toBe(info.state.messages);
    expect(new Set(ids).size).toBe(ids.length);
    await nc.close();

    console.info(
      `nats-cluster: killed ${killed!.name} (events stream leader) at ${Math.round(killed!.at)} ms of a ${Math.round(loadMs)} ms load; ` +
        `statuses ${JSON.stringify(load.statuses)}; ${load.videos.size} videos (${[...finals.values()].filter((s) => s === 'completed').length} completed), ` +
        `${load.chats.size} chats, ${ledger.length} ledger entries, ${receiver.received.length} webhook deliveries, ${ids.length} events in the stream, leader now ${info.cluster?.leader}`,
    );
  });
});
