import { jetstreamManager } from '@nats-io/jetstream';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MessagePattern } from '@nestjs/microservices';
import { natsNames, ok } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ensureEventsStream, NatsServiceClient, natsServerStrategy } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

/** Two deployments on one NATS server, told apart only by NATS_PREFIX: the same service, queue and subjects. */
describe.skipIf(!(await natsAvailable()))('NATS_PREFIX', () => {
  const run = uniqueSuffix();
  const [a, b, nobody] = [`a${run}`, `b${run}`, `c${run}`];
  const subject = 'billing.whoami';
  const apps: INestMicroservice[] = [];
  const clients: NatsServiceClient[] = [];
  const client = (prefix: string) => {
    const created = new NatsServiceClient({ servers: NATS_URL, prefix });
    clients.push(created);
    return created;
  };

  const deployment = async (prefix: string) => {
    @Controller()
    class WhoAmI {
      @MessagePattern(subject)
      whoami() {
        return ok(prefix);
      }
    }
    @Module({ controllers: [WhoAmI] })
    class WhoAmIModule {}
    const app = await NestFactory.createMicroservice(WhoAmIModule, {
      strategy: natsServerStrategy({ servers: NATS_URL, queue: 'billing', prefix }),
      logger: false,
    });
    await app.listen();
    apps.push(app);
  };

  beforeAll(async () => {
    await deployment(a);
    await deployment(b);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(apps.map((app) => app.close()));
  });

  it("answers each deployment's requests from its own services only, and none from a prefix nobody serves", async () => {
    for (let i = 0; i < 10; i++) {
      expect(await client(a).request(subject, {})).toEqual(ok(a));
      expect(await client(b).request(subject, {})).toEqual(ok(b));
    }
    const unanswered = await client(nobody).request(subject, {}, { timeoutMs: 1_000 });
    expect(unanswered).toMatchObject({ ok: false, error: { status: 503 } });
  });

  it("keeps broadcasts within a deployment", async () => {
    const heard: string[] = [];
    await client(a).onBroadcast('broadcast.billing.key_revoked', () => void heard.push(a));
    await client(b).onBroadcast('broadcast.billing.key_revoked', () => void heard.push(b));
    await client(b).broadcast('broadcast.billing.key_revoked', { key_hash: 'x' });
    await vi.waitFor(() => expect(heard).toEqual([b]));
  });

  it('gives each deployment a JetStream stream of its own, over subjects that do not overlap', async () => {
    const jsm = await jetstreamManager(await client(a).connection());
    await ensureEventsStream(jsm, a);
    await ensureEventsStream(jsm, b);
    const streams = [natsNames(a).eventsStream, natsNames(b).eventsStream];
    try {
      const infos = await Promise.all(streams.map((name) => jsm.streams.info(name)));
      expect(infos.map((info) => info.config.subjects)).toEqual([[`${a}.events.*.>`], [`${b}.events.*.>`]]);
    } finally {
      await Promise.all(streams.map((name) => jsm.streams.delete(name)));
    }
  });
});
