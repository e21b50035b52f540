import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subjects } from '@oc/contracts';
import { SqliteEventStore, type StoredEvent } from '@oc/eventstore';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService, standaloneProcess } from './harness';
import { natsReachable } from './nats';
import { otlpReceiver, type ReceivedSpan } from './otlp';

const SERVER = 2;
const CLIENT = 3;

interface Mode {
  start(env: Record<string, string>): Promise<RunningService>;
  /** The processes' `service.name`s. */
  gateway: string;
  video: string;
  billing: string;
  webhook: string;
  chat: string;
  /** A subject as its spans name it. */
  subject(service: RunningService, plain: string): string;
  /** How a video event reaches the webhook service: a JetStream message, or the shared log read in process. */
  eventHop: (service: RunningService, type: string) => Array<[string, string]>;
  eventsFile(service: RunningService): string;
  /** Projection batches run in the standalone's projection thread, which is not traced. */
  projectionLag: boolean;
}

const MODES: Array<[string, Mode]> = [
  ...((await natsReachable())
    ? [
        [
          'distributed over NATS',
          {
            start: (env) => distributed(env, { sharedEventStore: true, captureLogs: true }),
            gateway: 'oc-gateway',
            video: 'oc-video',
            billing: 'oc-billing',
            webhook: 'oc-webhook',
            chat: 'oc-chat',
            subject: (service, plain) => `${service.natsPrefix!}.${plain}`,
            eventHop: (service, type) => [
              ['oc-video', `publish ${service.natsPrefix!}.events.video.${type}`],
              ['oc-webhook', `process ${service.natsPrefix!}.events.video.${type}`],
            ],
            eventsFile: (service) => join(service.dataDir!, 'events.sqlite'),
            projectionLag: true,
          },
        ] as [string, Mode],
      ]
    : []),
  [
    'one process (pnpm start)',
    {
      start: async (env) => {
        const dataDir = await mkdtemp(join(tmpdir(), 'oc-traced-'));
        const service = await standaloneProcess({ ...env, DATA_DIR: dataDir }, { captureLogs: true });
        return { ...service, dataDir, stop: async () => (await service.stop(), await rm(dataDir, { recursive: true, force: true })) };
      },
      gateway: 'oc-standalone',
      video: 'oc-standalone',
      billing: 'oc-standalone',
      webhook: 'oc-standalone',
      chat: 'oc-standalone',
      subject: (_service, plain) => plain,
      eventHop: (_service, type) => [['oc-standalone', `process video.${type}`]],
      eventsFile: (service) => join(service.dataDir!, 'events.sqlite'),
      projectionLag: false,
    },
  ],
];

describe.each(MODES)('one trace from POST /v1/videos to the webhook delivery (%s)', (_name, mode) => {
  let otlp: Awaited<ReturnType<typeof otlpReceiver>>;
  let service: RunningService;
  let receiver: Receiver;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    otlp = await otlpReceiver();
    receiver = await httpReceiver();
    service = await mode.start({
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e',
        SIM_VIDEO_DURATION_MS: '0',
        SIM_VIDEO_PRERENDER: '0',
        WEBHOOK_MODE: 'development',
        WEBHOOK_ALLOW_PRIVATE: '1',
        CHAT_SIMULATOR_WORD_DELAY_MS: '0',
        // The request's log line is written at info.
        LOG_LEVEL: 'info',
    });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
    await otlp?.close();
  });

  it('links the gateway, NATS, the video service, the event store, billing and the delivery attempt', async () => {
    const { key, orgId, keyId } = await api.newCustomer({ credit: 5, scopes: ['video:read', 'video:write', 'webhook:write', 'webhook:read'] });
    // The webhook process may come up after the gateway reports ready.
    await vi.waitFor(
      async () => {
        const res = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
        expect(res.status).toBe(200);
      },
      { timeout: 30_000, interval: 250 },
    );
    const created = await api.call('POST', '/v1/videos', {
      token: key,
      body: { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' },
    });
    expect(created.status).toBe(200);
    const videoId = created.body.id as string;

    await vi.waitFor(() => expect(receiver.received.some((r) => JSON.parse(r.rawBody).data.id === videoId)).toBe(true), { timeout: 60_000, interval: 100 });
    const delivered = receiver.received.find((r) => JSON.parse(r.rawBody).data.id === videoId)!;
    // The receiver is a third party: no trace context goes to it.
    expect(delivered.headers.traceparent).toBeUndefined();

    const http = await vi.waitFor(
      () => {
        const found = otlp.spans.find((s) => s.service === mode.gateway && s.kind === SERVER && s.name === 'POST /v1/videos');
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    const attempt = await vi.waitFor(
      () => {
        const found = otlp.spans.find((s) => s.service === mode.webhook && s.kind === CLIENT && s.name === 'POST' && s.traceId === http.traceId);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(http.attributes).toMatchObject({
      'http.route': '/v1/videos',
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      // The id the client was given, on the span that serves its request.
      'http.response.header.x-request-id': [created.headers.get('x-request-id')],
      'oc.organization.id': orgId,
      'oc.api_key.id': keyId,
    });
    // The id a customer quotes is the trace's.
    expect(created.headers.get('x-request-id')).toBe(`req_${http.traceId}`);
    expect(attempt.attributes).toMatchObject({ 'http.response.status_code': 204, 'oc.webhook.attempt': 1, 'http.request.resend_count': 0 });

    // Every span on the way, each a descendant of the gateway's span: one tree, not only one trace id. Each
    // process exports its spans on its own schedule, so the tree is awaited whole.
    const subject = (plain: string) => mode.subject(service, plain);
    const expected: Array<[string, string]> = [
      [mode.gateway, `send ${subject(Subjects.video.create)}`],
      [mode.video, `process ${subject(Subjects.video.create)}`],
      [mode.video, 'append video'],
      [mode.video, `send ${subject(Subjects.billing.reserveFunds)}`],
      [mode.billing, `process ${subject(Subjects.billing.reserveFunds)}`],
      [mode.billing, 'append account'],
      [mode.video, 'video job step'],
      [mode.video, 'generate_content video-2'],
      [mode.video, `send ${subject(Subjects.billing.captureReservation)}`],
      [mode.billing, `process ${subject(Subjects.billing.captureReservation)}`],
      ...mode.eventHop(service, 'VideoCompleted'),
      [mode.webhook, 'append delivery'],
      [mode.webhook, 'webhook delivery'],
      [mode.webhook, 'POST'],
    ];
    const spans = await vi.waitFor(
      () => {
        const spans = otlp.trace(http.traceId);
        const byId = new Map(spans.map((s) => [s.spanId, s]));
        const descendsFromRequest = (span: ReceivedSpan) => {
          for (let at: ReceivedSpan | undefined = span; at; at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined) if (at === http) return true;
          return false;
        };
        for (const [process, name] of expected) {
          const span = spans.find((s) => s.service === process && s.name === name);
          expect(span, `${process}: ${name}`).toBeDefined();
          expect(descendsFromRequest(span!), `${process}: ${name} descends from POST /v1/videos`).toBe(true);
        }
        return spans;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(spans.find((s) => s.name === 'generate_content video-2')!.attributes).toMatchObject({
      'gen_ai.operation.name': 'generate_content',
      'gen_ai.request.model': 'video-2',
      'gen_ai.provider.name': 'oc.simulator',
      'oc.video.id': videoId,
    });
    // The video service's handling of the request names the video it made, so that its traces are found by its id.
    expect(spans.find((s) => s.service === mode.video && s.name === `process ${subject(Subjects.video.create)}`)!.attributes).toMatchObject({
      'oc.video.id': videoId,
      'oc.organization.id': orgId,
    });

    // The events themselves carry the chain: the request's trace id as correlation id, and their traceparent.
    const store = new SqliteEventStore({ filename: mode.eventsFile(service), readOnly: true });
    try {
      const video = await store.readStream(`video-${videoId}`);
      const requested = video[0]!;
      const completed = video.find((e) => e.type === 'VideoCompleted')!;
      expect(requested.metadata).toMatchObject({ correlationId: http.traceId, traceparent: expect.stringContaining(http.traceId) });
      expect(completed.metadata).toMatchObject({ correlationId: http.traceId, causationId: requested.id, traceparent: expect.stringContaining(http.traceId) });
      const all: StoredEvent[] = await store.readAll({ maxCount: 10_000 });
      const captured = all.find((e) => e.type === 'ReservationCaptured' && (e.data as { reservation_id: string }).reservation_id === videoId)!;
      expect(captured.metadata).toMatchObject({ correlationId: http.traceId, traceparent: expect.stringContaining(http.traceId) });
      const scheduled = all.find((e) => e.type === 'DeliveryScheduled' && (e.data as { event: { data: { id: string } } }).event.data.id === videoId)!;
      expect(scheduled.metadata).toMatchObject({ correlationId: http.traceId, causationId: completed.id });
    } finally {
      await store.close();
    }
  });

  it("names a chat completion's organization, key and completion on its spans, its x-request-id is its trace id, and so is its log line's", async () => {
    const { key, orgId, keyId } = await api.newCustomer({ credit: 5, scopes: ['chat:write'] });
    const res = await api.call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages: [{ role: 'user', content: 'Hello' }] } });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');

    const server = await vi.waitFor(
      () => {
        const found = otlp.spans.find((s) => s.kind === SERVER && s.name === 'POST /v1/chat/completions' && s.attributes['oc.api_key.id'] === keyId);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(server.service).toBe(mode.gateway);
    expect(server.attributes).toMatchObject({ 'oc.organization.id': orgId, 'oc.api_key.id': keyId, 'http.response.header.x-request-id': [requestId] });
    expect(requestId).toBe(`req_${server.traceId}`);
    const completion = await vi.waitFor(
      () => {
        const found = otlp.trace(server.traceId).find((s) => s.name === `process ${mode.subject(service, Subjects.chat.createChatCompletion)}`);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(completion).toMatchObject({ service: mode.chat, attributes: { 'oc.completion.id': res.body.id, 'oc.organization.id': orgId } });
    // The key's public id, never the secret, on any span of the trace.
    expect(JSON.stringify(otlp.trace(server.traceId))).not.toContain(key);

    // The request's log line, found by the id the client was given, names the same trace.
    const line = await vi.waitFor(
      () => {
        const found = service.logs!().find((l) => l.msg === 'request' && l.request_id === requestId);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(line).toMatchObject({ trace_id: server.traceId, org_id: orgId, status: 200 });
  });

  it("gives a request whose trace its client chose (its own traceparent) an id of the gateway's, never the client's trace id", async () => {
    const { key, keyId } = await api.newCustomer({ scopes: ['chat:read'] });
    const chosen = 'feedfacefeedfacefeedfacefeedface';
    const res = await fetch(`${service.url}/v1/models`, { headers: { authorization: `Bearer ${key}`, traceparent: `00-${chosen}-0123456789abcdef-01` } });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id')!;
    // Another client could send the same traceparent: a request id is never one a client picked.
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(requestId).not.toContain(chosen);
    const server = await vi.waitFor(
      () => {
        const found = otlp.spans.find((s) => s.kind === SERVER && s.attributes['oc.api_key.id'] === keyId);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(server.traceId).toBe(chosen);
    expect(server.attributes['http.response.header.x-request-id']).toEqual([requestId]);
  });

  it('names each process an instance of its own: one service.instance.id per process, on every span it exports', () => {
    const instances = new Map<string, Set<unknown>>();
    for (const span of otlp.spans) instances.set(span.service, (instances.get(span.service) ?? new Set()).add(span.instance));
    expect([...instances.keys()].sort()).toEqual([...new Set([mode.gateway, mode.video, mode.billing, mode.webhook, mode.chat])].sort());
    // The standalone's gateway thread exports as the process it runs in, not as an instance of its own.
    for (const [name, ids] of instances) {
      expect(ids.size, name).toBe(1);
      expect([...ids][0], name).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    const all = [...instances.values()].flatMap((ids) => [...ids]);
    expect(new Set(all).size).toBe(all.length);
  });

  it('exports the metrics: requests by route and status, video jobs, webhook attempts, reservations, projection lag', async () => {
    const has = (service: string, metric: string, attributes: Record<string, unknown> = {}) =>
      otlp.points.some((p) => p.service === service && p.metric === metric && Object.entries(attributes).every(([k, v]) => p.attributes[k] === v));
    await vi.waitFor(
      () => {
        expect(has(mode.gateway, 'http.server.request.duration', { 'http.route': '/v1/videos', 'http.response.status_code': 200 })).toBe(true);
        expect(has(mode.video, 'oc.video.jobs', { 'oc.video.state': 'completed' })).toBe(true);
        expect(has(mode.video, 'oc.video.job.duration', { 'oc.video.state': 'completed' })).toBe(true);
        expect(has(mode.webhook, 'oc.webhook.delivery.attempts', { 'oc.webhook.outcome': 'success' })).toBe(true);
        expect(has(mode.webhook, 'oc.webhook.delivery.duration')).toBe(true);
        expect(has(mode.billing, 'oc.billing.reservations', { 'oc.billing.operation': 'capture', 'oc.billing.outcome': 'done' })).toBe(true);
        if (mode.projectionLag) expect(has(mode.billing, 'oc.projection.lag', { 'oc.service': 'billing' })).toBe(true);
      },
      { timeout: 15_000, interval: 250 },
    );
  });
});
