import { Controller, Inject, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, MessagePattern, NatsContext, Payload, type CustomTransportStrategy } from '@nestjs/microservices';
import { fail, internalError, notFound, ok, serviceUnavailable } from '@oc/contracts';
import { NEVER, of } from 'rxjs';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { headersOf, type ServiceClient } from '../src';
import { uniqueSuffix } from './nats';

/** How one transport is started: the scenarios below run unchanged over each. */
export interface TransportMode {
  /** A new server strategy; each call is one more replica of the service. */
  strategy(): CustomTransportStrategy;
  client(): ServiceClient;
  close(): Promise<void>;
}

const REPLICA = Symbol('REPLICA');
const STATS = Symbol('STATS');
interface Stats {
  handled: number;
}

function testService(prefix: string, replica: string, stats: Stats) {
  const shared = { list: [1] };

  @Controller()
  class TestController {
    constructor(
      @Inject(REPLICA) private readonly replica: string,
      @Inject(STATS) private readonly stats: Stats,
    ) {}

    @MessagePattern(`${prefix}.echo`)
    echo(@Payload() payload: unknown) {
      return ok(payload);
    }

    @MessagePattern(`${prefix}.sum`)
    async sum(@Payload() { a, b }: { a: number; b: number }) {
      await Promise.resolve();
      this.stats.handled += 1;
      return ok({ sum: a + b, replica: this.replica });
    }

    @MessagePattern(`${prefix}.observable`)
    observable() {
      return of(ok('first'), ok('second'));
    }

    @MessagePattern(`${prefix}.mutate`)
    mutate(@Payload() payload: { list: number[] }) {
      payload.list.push(99);
      return ok({ received: payload.list, shared });
    }

    @MessagePattern(`${prefix}.reject`)
    reject() {
      return fail(notFound('widget_not_found', 'No such widget.'));
    }

    @MessagePattern(`${prefix}.headers`)
    headers(@Ctx() ctx: NatsContext) {
      return ok({
        all: headersOf(ctx),
        traceparent: ctx.getHeaders()?.get('traceparent') ?? null,
        subject: ctx.getSubject(),
      });
    }

    @MessagePattern(`${prefix}.never`)
    never() {
      return NEVER;
    }

    @MessagePattern(`${prefix}.throws`)
    throws(): never {
      throw new Error('boom');
    }
  }

  @Module({
    controllers: [TestController],
    providers: [
      { provide: REPLICA, useValue: replica },
      { provide: STATS, useValue: stats },
    ],
  })
  class TestModule {}
  return TestModule;
}

export function transportScenarios(createMode: () => Promise<TransportMode>) {
  const prefix = `test${uniqueSuffix()}`;
  const stats: Stats = { handled: 0 };
  const replicas: INestMicroservice[] = [];
  const clients: ServiceClient[] = [];
  let mode: TransportMode;
  let client: ServiceClient;

  const startReplica = async (name: string) => {
    const app = await NestFactory.createMicroservice(testService(prefix, name, stats), {
      strategy: mode.strategy(),
      logger: false,
    });
    await app.listen();
    replicas.push(app);
  };
  const newClient = () => {
    const created = mode.client();
    clients.push(created);
    return created;
  };

  beforeAll(async () => {
    mode = await createMode();
    await startReplica('a');
    client = newClient();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(replicas.map((r) => r.close()));
    await mode?.close();
  });

  it('round-trips a request to its handler and back', async () => {
    const payload = { text: 'hello', nested: { n: 1, list: [true, null] } };
    expect(await client.request(`${prefix}.echo`, payload)).toEqual({ ok: true, data: payload });
    expect(await client.request(`${prefix}.sum`, { a: 2, b: 3 })).toEqual(ok({ sum: 5, replica: 'a' }));
  });

  it('answers with the first value of an observable handler', async () => {
    expect(await client.request(`${prefix}.observable`, {})).toEqual(ok('first'));
  });

  it('passes Reply error values through untouched', async () => {
    expect(await client.request(`${prefix}.reject`, {})).toEqual(fail(notFound('widget_not_found', 'No such widget.')));
  });

  it('delivers request headers to the handler context', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    // Over NATS the subject carries the deployment's NATS_PREFIX (`oc.` by default).
    const subject = expect.stringMatching(new RegExp(`^(oc\\.)?${prefix}\\.headers$`));
    const reply = await client.request(`${prefix}.headers`, {}, { headers: { traceparent, tracestate: 'oc=1' } });
    expect(reply).toEqual(ok({ all: { traceparent, tracestate: 'oc=1' }, traceparent, subject }));
    expect(await client.request(`${prefix}.headers`, {})).toEqual(ok({ all: {}, traceparent: null, subject }));
  });

  it('never shares payload objects between caller and handler', async () => {
    const payload = { list: [1] };
    const first = (await client.request<{ received: number[]; shared: { list: number[] } }>(
      `${prefix}.mutate`,
      payload,
    )) as { ok: true; data: { received: number[]; shared: { list: number[] } } };
    expect(payload).toEqual({ list: [1] });
    expect(first.data.received).toEqual([1, 99]);
    first.data.shared.list.push(42);
    expect(await client.request(`${prefix}.mutate`, payload)).toEqual(ok({ received: [1, 99], shared: { list: [1] } }));
  });

  it('answers service_unavailable when the handler does not answer in time', async () => {
    expect(await client.request(`${prefix}.never`, {}, { timeoutMs: 100 })).toEqual(fail(serviceUnavailable()));
  });

  it('answers service_unavailable at once when nobody serves the subject', async () => {
    const started = performance.now();
    const reply = await client.request(`${prefix}.nobody`, {}, { timeoutMs: 20_000 });
    expect(reply).toEqual(fail(serviceUnavailable()));
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('answers internal_error when the handler throws', async () => {
    expect(await client.request(`${prefix}.throws`, {})).toEqual(fail(internalError()));
  });

  it('answers concurrent requests each with its own result', async () => {
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.request<{ sum: number }>(`${prefix}.sum`, { a: i, b: 1000 })),
    );
    expect(replies.map((r) => (r.ok ? r.data.sum : r.error.code))).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1000),
    );
  });

  it('shares requests among replicas, each request handled once', async () => {
    await startReplica('b');
    const before = stats.handled;
    const replies = await Promise.all(
      Array.from({ length: 40 }, () => client.request<{ replica: string }>(`${prefix}.sum`, { a: 1, b: 1 })),
    );
    const servedBy = new Set(replies.map((r) => (r.ok ? r.data.replica : r.error.code)));
    expect(servedBy).toEqual(new Set(['a', 'b']));
    expect(stats.handled - before).toBe(40);
  });

  it('delivers a broadcast to every subscriber, each with its own copy', async () => {
    const subject = `${prefix}.broadcast`;
    const [first, second] = [newClient(), newClient()];
    const received: Array<[string, unknown]> = [];
    await first.onBroadcast(subject, (payload) => {
      received.push(['first', structuredClone(payload)]);
      (payload as { keyId: string }).keyId = 'mutated';
    });
    await first.onBroadcast(subject, () => {
      throw new Error('a failing subscriber must not stop the others');
    });
    const secondSubscription = await second.onBroadcast(subject, (payload) => received.push(['second', payload]));

    const notice = { keyId: 'key_1' };
    await client.broadcast(subject, notice);
    await vi.waitFor(() =>
      expect(received).toEqual(
        expect.arrayContaining([
          ['first', { keyId: 'key_1' }],
          ['second', { keyId: 'key_1' }],
        ]),
      ),
    );
    expect(received).toHaveLength(2);
    expect(notice).toEqual({ keyId: 'key_1' });

    await secondSubscription.stop();
    await client.broadcast(subject, { keyId: 'key_2' });
    await vi.waitFor(() => expect(received).toContainEqual(['first', { keyId: 'key_2' }]));
  });

  it('answers ping while the transport is up', async () => {
    await expect(client.ping()).resolves.toBeUndefined();
  });
}

