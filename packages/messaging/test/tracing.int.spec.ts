import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, MessagePattern, NatsContext, Payload, type CustomTransportStrategy } from '@nestjs/microservices';
import { fail, natsNames, ok, ownsStream, serviceUnavailable } from '@oc/contracts';
import { SqliteCheckpointStore, SqliteEventStore, CommandHandler, type StoredEvent } from '@oc/eventstore';
import { activeTrace, createLogger, inSpan } from '@oc/telemetry';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ensureEventsStream,
  headersOf,
  InProcessBroker,
  InProcessServerStrategy,
  InProcessServiceClient,
  JetStreamEventBus,
  MessageTracingInterceptor,
  NatsServiceClient,
  natsServerStrategy,
  type ServiceClient,
  startOutboxRelay,
  traceServiceClient,
} from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

const natsUp = await natsAvailable();

/** What the handlers log, as pino writes it. */
const logged: string[] = [];
const logger = createLogger({ service: 'traced' }, { write: (line: string) => void logged.push(line) });

function tracedService(subjectPrefix: string) {
  @Controller()
  class Traced {
    @MessagePattern(`${subjectPrefix}.work`)
    async work(@Payload() payload: { fail?: boolean }, @Ctx() ctx: NatsContext) {
      logger.info('working');
      // Work inside the handler belongs to the handler's span.
      const inner = await inSpan('inner', {}, async () => activeTrace()?.spanId);
      return payload.fail ? fail(serviceUnavailable()) : ok({ traceparent: headersOf(ctx).traceparent ?? null, inner });
    }
  }
  @Module({ controllers: [Traced] })
  class TracedModule {}
  return TracedModule;
}

const modes: Array<[string, () => Promise<{ strategy: CustomTransportStrategy; client: ServiceClient; system: string; subject: (s: string) => string; close(): Promise<void> }>]> = [
  [
    'in-process',
    async () => {
      const broker = new InProcessBroker();
      return { strategy: new InProcessServerStrategy(broker), client: new InProcessServiceClient(broker), system: 'in-process', subject: (s) => s, close: async () => {} };
    },
  ],
  ...(natsUp
    ? [
        [
          'NATS',
          async () => {
            const prefix = `t${uniqueSuffix()}`;
            const client = new NatsServiceClient({ servers: NATS_URL, prefix });
            return {
              strategy: natsServerStrategy({ servers: NATS_URL, queue: 'traced', prefix }),
              client,
              system: 'nats',
              subject: natsNames(prefix).subject,
              close: () => client.close(),
            };
          },
        ] as (typeof modes)[number],
      ]
    : []),
];

describe.each(modes)('request tracing (%s)', (_name, make) => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let app: INestMicroservice;
  let transport: Awaited<ReturnType<(typeof modes)[number][1]>>;
  let client: ServiceClient;
  const prefix = `svc${uniqueSuffix()}`;

  beforeAll(async () => {
    tracing = registerTestTracing();
    transport = await make();
    app = await NestFactory.createMicroservice(tracedService(prefix), { strategy: transport.strategy, logger: false });
    app.useGlobalInterceptors(new MessageTracingInterceptor(transport.system));
    await app.listen();
    client = traceServiceClient(transport.client, { system: transport.system, destination: transport.subject });
  });
  beforeEach(() => tracing.exporter.reset());
  afterAll(async () => {
    await app?.close();
    await transport?.close();
    await tracing.shutdown();
  });

  it('carries the trace from the caller through a send span to the handler’s process span', async () => {
    const reply = await inSpan('POST /v1/videos', { kind: 'server' }, () => client.request<{ traceparent: string; inner: string }>(`${prefix}.work`, {}));
    const spans = tracing.spans();
    const [http, send, process, inner] = ['POST /v1/videos', `send ${transport.subject(`${prefix}.work`)}`, `process ${transport.subject(`${prefix}.work`)}`, 'inner'].map(
      (name) => spans.find((s) => s.name === name)!,
    );
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
    expect(send!.parentSpanContext?.spanId).toBe(http!.spanContext().spanId);
    expect(process!.parentSpanContext?.spanId).toBe(send!.spanContext().spanId);
    expect(inner!.parentSpanContext?.spanId).toBe(process!.spanContext().spanId);
    expect(reply).toEqual(ok({ traceparent: `00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01`, inner: inner!.spanContext().spanId }));
    expect(send!.attributes).toMatchObject({ 'messaging.system': transport.system, 'messaging.operation.type': 'send' });
    // The handler's log line names its trace and span.
    expect(JSON.parse(logged.at(-1)!)).toMatchObject({ msg: 'working', trace_id: http!.spanContext().traceId, span_id: process!.spanContext().spanId });
    expect(process!.attributes).toMatchObject({ 'messaging.destination.name': transport.subject(`${prefix}.work`), 'messaging.operation.type': 'process' });
  });

  it('marks a 5xx answer as the failure of both spans', async () => {
    await client.request(`${prefix}.work`, { fail: true });
    for (const span of tracing.spans().filter((s) => s.name.startsWith('send') || s.name.startsWith('process'))) {
      expect(span.status.code).toBe(2);
      expect(span.attributes).toMatchObject({ 'error.type': 'service_unavailable', 'oc.error.status': 503 });
    }
  });
});

describe.skipIf(!natsUp)('event tracing: outbox relay → JetStream → consumer', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const prefix = `t${uniqueSuffix()}`;
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    jsm = await jetstreamManager(nc);
    await ensureEventsStream(jsm, prefix);
  });
  beforeEach(() => {
    tracing = registerTestTracing();
  });
  afterEach(() => tracing.shutdown());
  afterAll(async () => {
    await jsm?.streams.delete(natsNames(prefix).eventsStream).catch(() => undefined);
    await nc?.close();
  });

  it('publishes each event in the trace it was stored in, and the consumer continues it', async () => {
    const store = new SqliteEventStore({ filename: ':memory:' });
    const commands = new CommandHandler(store);
    const decider = { initialState: () => null, decide: () => [{ type: 'VideoCompleted', data: {} }], evolve: () => null };
    await inSpan('video job step', {}, () => commands.handle('video-1', decider, {}));
    const relay = await startOutboxRelay({ service: 'video', prefix, owns: ownsStream('video'), eventStore: store, checkpoints: new SqliteCheckpointStore(store), js: jsm.jetstream() });
    const seen: StoredEvent[] = [];
    const bus = new JetStreamEventBus(nc, { prefix });
    const consumer = await bus.consume(`traced-${uniqueSuffix()}`, { service: 'video', types: ['VideoCompleted'] }, async (event) => {
      await inSpan('schedule delivery', {}, async () => void seen.push(event));
    });
    await vi.waitFor(() => expect(seen).toHaveLength(1));
    await consumer.stop();
    await relay.stop();
    await store.close();

    const spans = tracing.spans();
    const find = (prefixOfName: string) => spans.find((s) => s.name.startsWith(prefixOfName))!;
    const [step, publish, process, schedule] = [find('video job step'), find('publish'), find('process'), find('schedule delivery')];
    expect(seen[0]!.metadata.traceparent).toBe(`00-${step.spanContext().traceId}-${step.spanContext().spanId}-01`);
    expect(publish.parentSpanContext?.spanId).toBe(step.spanContext().spanId);
    expect(publish.attributes).toMatchObject({ 'messaging.destination.name': natsNames(prefix).eventSubject('video', 'VideoCompleted'), 'messaging.message.id': seen[0]!.id });
    expect(process.parentSpanContext?.spanId).toBe(publish.spanContext().spanId);
    expect(schedule.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    expect(new Set([step, publish, process, schedule].map((s) => s.spanContext().traceId)).size).toBe(1);
  });
});
