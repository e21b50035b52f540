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
            start: (env) => distributed(env, { sharedEventStore: true }),
            gateway: 'oc-gateway',
            video: 'oc-video',
            billing: 'oc-billing',
            webhook: 'oc-webhook',
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
        const service = await standaloneProcess({ ...env, DATA_DIR: dataDir });
        return { ...service, dataDir, stop: async () => (await service.stop(), await rm(dataDir, { recursive: true, force: true })) };
      },
      gateway: 'oc-standalone',
      video: 'oc-standalone',
      billing: 'oc-standalone',
      webhook: 'oc-standalone',
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
    });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
    await otlp?.close();
  });

  it('links the gateway, NATS, the video service, the event store, billing and the delivery attempt', async () => {
    const { key } = await api.newCustomer({ credit: 5, scopes: ['video:read', 'video:write', 'webhook:write', 'webhook:read'] });
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
    });
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
