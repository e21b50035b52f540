import { join } from 'node:path';
import { Subjects } from '@oc/contracts';
import { SqliteEventStore, type StoredEvent } from '@oc/eventstore';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService } from './harness';
import { natsReachable } from './nats';
import { otlpReceiver, type ReceivedSpan } from './otlp';

const SERVER = 2;
const CLIENT = 3;

describe.skipIf(!(await natsReachable()))('one trace from POST /v1/videos to the webhook delivery (distributed over NATS)', () => {
  let otlp: Awaited<ReturnType<typeof otlpReceiver>>;
  let service: RunningService;
  let receiver: Receiver;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    otlp = await otlpReceiver();
    receiver = await httpReceiver();
    service = await distributed(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e',
        SIM_VIDEO_DURATION_MS: '0',
        SIM_VIDEO_PRERENDER: '0',
        WEBHOOK_MODE: 'development',
        WEBHOOK_ALLOW_PRIVATE: '1',
      },
      { sharedEventStore: true },
    );
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
        const found = otlp.spans.find((s) => s.service === 'oc-gateway' && s.kind === SERVER && s.name === 'POST /v1/videos');
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    const attempt = await vi.waitFor(
      () => {
        const found = otlp.spans.find((s) => s.service === 'oc-webhook' && s.kind === CLIENT && s.name === 'POST' && s.traceId === http.traceId);
        expect(found).toBeDefined();
        return found!;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(http.attributes).toMatchObject({ 'http.route': '/v1/videos', 'http.request.method': 'POST', 'http.response.status_code': 200 });
    expect(attempt.attributes).toMatchObject({ 'http.response.status_code': 204, 'oc.webhook.attempt': 1, 'http.request.resend_count': 0 });

    // Every span on the way, each a descendant of the gateway's span: one tree, not only one trace id.
    await vi.waitFor(() => expect(otlp.trace(http.traceId).some((s) => s.name === 'video job step')).toBe(true), { timeout: 15_000 });
    const spans = otlp.trace(http.traceId);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const descendsFromRequest = (span: ReceivedSpan) => {
      for (let at: ReceivedSpan | undefined = span; at; at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined) if (at === http) return true;
      return false;
    };
    const subject = (plain: string) => `${service.natsPrefix!}.${plain}`;
    const expected: Array<[string, string]> = [
      ['oc-gateway', `send ${subject(Subjects.video.create)}`],
      ['oc-video', `process ${subject(Subjects.video.create)}`],
      ['oc-video', 'append video'],
      ['oc-video', `send ${subject(Subjects.billing.reserveFunds)}`],
      ['oc-billing', `process ${subject(Subjects.billing.reserveFunds)}`],
      ['oc-billing', 'append account'],
      ['oc-video', 'video job step'],
      ['oc-video', 'generate_content video-2'],
      ['oc-video', `send ${subject(Subjects.billing.captureReservation)}`],
      ['oc-billing', `process ${subject(Subjects.billing.captureReservation)}`],
      ['oc-video', `publish ${subject('events.video.VideoCompleted')}`],
      ['oc-webhook', `process ${subject('events.video.VideoCompleted')}`],
      ['oc-webhook', 'append delivery'],
      ['oc-webhook', 'webhook delivery'],
      ['oc-webhook', 'POST'],
    ];
    for (const [process, name] of expected) {
      const span = spans.find((s) => s.service === process && s.name === name);
      expect(span, `${process}: ${name}`).toBeDefined();
      expect(descendsFromRequest(span!), `${process}: ${name} descends from POST /v1/videos`).toBe(true);
    }
    expect(spans.find((s) => s.name === 'generate_content video-2')!.attributes).toMatchObject({
      'gen_ai.operation.name': 'generate_content',
      'gen_ai.request.model': 'video-2',
      'gen_ai.provider.name': 'oc.simulator',
    });

    // The events themselves carry the chain: the request's trace id as correlation id, and their traceparent.
    const store = new SqliteEventStore({ filename: join(service.dataDir!, 'events.sqlite'), readOnly: true });
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
        expect(has('oc-gateway', 'http.server.request.duration', { 'http.route': '/v1/videos', 'http.response.status_code': 200 })).toBe(true);
        expect(has('oc-video', 'oc.video.jobs', { 'oc.video.state': 'completed' })).toBe(true);
        expect(has('oc-video', 'oc.video.job.duration', { 'oc.video.state': 'completed' })).toBe(true);
        expect(has('oc-webhook', 'oc.webhook.delivery.attempts', { 'oc.webhook.outcome': 'success' })).toBe(true);
        expect(has('oc-webhook', 'oc.webhook.delivery.duration')).toBe(true);
        expect(has('oc-billing', 'oc.billing.reservations', { 'oc.billing.operation': 'capture', 'oc.billing.outcome': 'done' })).toBe(true);
        expect(has('oc-billing', 'oc.projection.lag', { 'oc.service': 'billing' })).toBe(true);
      },
      { timeout: 15_000, interval: 250 },
    );
  });
});
