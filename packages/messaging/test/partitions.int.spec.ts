import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MessagePattern } from '@nestjs/microservices';
import type { NatsConnection } from '@nats-io/transport-node';
import { ok, Subjects } from '@oc/contracts';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type DrainingServerNats, NatsServiceClient, natsServerStrategy, organizationPartition, partitionOwner } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

/** Billing replicas that answer a reservation with their own name, over one NATS server under a prefix of the test's. */
describe.skipIf(!(await natsAvailable()))('requests on an organization reach the replica owning its partition', () => {
  const prefix = `part${uniqueSuffix()}`;
  const apps: INestMicroservice[] = [];
  const clients: NatsServiceClient[] = [];
  const orgs = Array.from({ length: 24 }, (_, i) => `org_${uniqueSuffix()}${i}`);

  const replica = async (self: string) => {
    @Controller()
    class Reserve {
      @MessagePattern(Subjects.billing.reserveFunds)
      reserve() {
        return ok(self);
      }
      @MessagePattern(Subjects.billing.getBalance)
      balance() {
        return ok(self);
      }
    }
    @Module({ controllers: [Reserve] })
    class ReplicaModule {}
    const strategy = natsServerStrategy({ servers: NATS_URL, queue: 'billing', prefix, owner: { service: 'billing', self } });
    const app = await NestFactory.createMicroservice(ReplicaModule, { strategy, logger: false });
    await app.listen();
    apps.push(app);
    return { app, strategy };
  };
  const client = () => {
    const created = new NatsServiceClient({ servers: NATS_URL, prefix });
    clients.push(created);
    return created;
  };
  const answerer = async (c: NatsServiceClient, org: string) => {
    const reply = await c.request<string>(Subjects.billing.reserveFunds, { org_id: org, reservation_id: 'r', amount_micros: 1 }, { timeoutMs: 2_000 });
    if (!reply.ok) throw new Error(JSON.stringify(reply.error));
    return reply.data;
  };
  const owner = (org: string, members: string[]) => partitionOwner(organizationPartition(org), members);

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await Promise.all(apps.splice(0).map((app) => app.close().catch(() => undefined)));
  });

  it("sends each organization's account requests to one replica, its partition's owner, and spreads the organizations over both", async () => {
    await replica('billing-1');
    await replica('billing-2');
    const c = client();
    for (let round = 0; round < 5; round++) {
      for (const org of orgs) expect(await answerer(c, org)).toBe(owner(org, ['billing-1', 'billing-2']));
    }
    expect(new Set(orgs.map((org) => owner(org, ['billing-1', 'billing-2'])))).toEqual(new Set(['billing-1', 'billing-2']));
  });

  it('leaves the other subjects to the queue group: any replica answers them', async () => {
    await replica('billing-1');
    await replica('billing-2');
    const c = client();
    const answered = new Set<string>();
    for (let i = 0; i < 60; i++) {
      const reply = await c.request<string>(Subjects.billing.getBalance, { org_id: orgs[0] });
      if (reply.ok) answered.add(reply.data);
    }
    expect(answered).toEqual(new Set(['billing-1', 'billing-2']));
  });

  it('hands a stopping replica’s organizations to the other at once', async () => {
    await replica('billing-1');
    const second = await replica('billing-2');
    const c = client();
    await second.strategy.drain(1_000);
    for (const org of orgs) expect(await answerer(c, org)).toBe('billing-1');
  });

  it("answers a killed replica's organizations through the other, before the members notice it is gone", async () => {
    await replica('billing-1');
    const second = await replica('billing-2');
    const c = client();
    for (const org of orgs) expect(await answerer(c, org)).toBe(owner(org, ['billing-1', 'billing-2']));
    // As a killed process's: its subscriptions go with its connection, and it never says it leaves.
    await (second.strategy as DrainingServerNats & { unwrap<T>(): T }).unwrap<NatsConnection>().close();
    const started = performance.now();
    for (const org of orgs) expect(await answerer(c, org)).toBe('billing-1');
    expect(performance.now() - started).toBeLessThan(2_000);
    // Once the members expire it, billing-1 owns every partition.
    await vi.waitFor(async () => {
      const nc = await c.connection();
      for (const org of orgs.slice(0, 4)) {
        // Nest's framing, sent to the partition's own subject: answered only if a replica listens there.
        const packet = JSON.stringify({ pattern: Subjects.billing.reserveFunds, data: { org_id: org }, id: 'direct' });
        const direct = await nc.request(`${prefix}.partitions.${organizationPartition(org)}.${Subjects.billing.reserveFunds}`, packet, { timeout: 500 });
        expect(direct.json<{ response: unknown }>().response).toEqual(ok('billing-1'));
      }
    }, { timeout: 6_000, interval: 250 });
  });
});
