import type { ServerResponse } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_WEBHOOKS_PER_ORGANIZATION, webhookEventId } from '@oc/contracts';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  completedVideo,
  httpReceiver,
  httpsReceiver,
  type Receiver,
  stripe,
  type TestCa,
  testCertificates,
} from '../../webhook/test/support';
import { type VideoProducer, videoProducer } from '../../webhook/test/video-producer';
import { clientFor } from './client';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

// Long enough for a process to be killed while a retry waits; the embedded clock is moved by hand.
const RETRY_DELAYS_MS = [0, 1_500];
const failWith =
  (status: number) =>
  (_req: unknown, res: ServerResponse): void => {
    res.writeHead(status).end('not today');
  };
const okay = (_req: unknown, res: ServerResponse): void => {
  res.writeHead(200).end('thanks');
};

describe.each(modes)('webhooks (%s)', (mode, start) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let producer: VideoProducer;
  let tls: TestCa;
  let dir: string;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    tls = await testCertificates();
    dir = await mkdtemp(join(tmpdir(), 'oc-webhook-e2e-'));
    await writeFile(join(dir, 'ca.pem'), tls.ca);
    const dataDir = join(dir, 'data');
    service = await start({
      DATA_DIR: dataDir,
      WEBHOOK_MODE: 'development',
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_CA_FILE: join(dir, 'ca.pem'),
      WEBHOOK_RETRY_DELAYS_MS: RETRY_DELAYS_MS.join(','),
      WEBHOOK_TIMEOUT_MS: '3000',
    });
    api = clientFor(service);
    producer = await videoProducer(
      service.mode === 'embedded' ? { sqliteFile: join(dataDir, 'events.sqlite') } : { natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', prefix: service.natsPrefix },
    );
    // The webhook process may come up after the gateway reports ready.
    const { key } = await api.newCustomer({ scopes: ['webhook:read'] });
    await vi.waitFor(async () => expect((await api.call('GET', '/v1/webhooks', { token: key })).status).toBe(200), {
      timeout: 30_000,
      interval: 200,
    });
  });
  afterAll(async () => {
    await producer?.close();
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  const track = (r: Receiver) => (receivers.push(r), r);
  const customer = () => api.newCustomer({ scopes: ['webhook:read', 'webhook:write', 'webhook:delete'] });
  /** Lets retry delays pass: the embedded clock is the test's, the distributed one is real. */
  const elapse = (ms: number) => service.clock?.advance(ms);
  const eventually = (check: () => Promise<void> | void) => vi.waitFor(check, { timeout: 20_000, interval: 50 });
  const waitFor = async (receiver: Receiver, count: number, stepMs = 0) =>
    eventually(() => {
      if (stepMs) elapse(stepMs);
      expect(receiver.received.length).toBeGreaterThanOrEqual(count);
    });

  describe('registration', () => {
    it('creates a webhook and shows its secret only in that response', async () => {
      const { key } = await customer();
      const created = await api.call('POST', '/v1/webhooks', {
        token: key,
        body: { url: 'https://hooks.example.com/oc', events: ['video.completed', 'video.failed'], description: 'prod' },
      });
      expect(created.status).toBe(200);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^wh_/),
        object: 'webhook',
        url: 'https://hooks.example.com/oc',
        events: ['video.completed', 'video.failed'],
        description: 'prod',
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
        is_active: true,
        created: expect.any(Number),
        last_success_at: null,
        last_failure_at: null,
        failure_count: 0,
      });
      const id = created.body.id;
      const list = await api.call('GET', '/v1/webhooks', { token: key });
      expect(list.body).toEqual({
        object: 'list',
        data: [{ id, object: 'webhook', url: 'https://hooks.example.com/oc', events: ['video.completed', 'video.failed'], is_active: true, created: created.body.created }],
        has_more: false,
      });
      const one = await api.call('GET', `/v1/webhooks/${id}`, { token: key });
      expect(one.body).toMatchObject({ id, is_active: true, last_success_at: null, last_failure_at: null, failure_count: 0 });
      expect(JSON.stringify([list.body, one.body])).not.toContain('whsec_');
    });

    it.each([
      ['a URL that is not http(s)', { url: 'ftp://hooks.example.com', events: ['video.completed'] }, 'url', 'invalid_url'],
      ['a missing URL', { events: ['video.completed'] }, 'url', 'missing_parameter'],
      ['no events', { url: 'https://hooks.example.com', events: [] }, 'events', 'invalid_events'],
      ['an unknown event type', { url: 'https://hooks.example.com', events: ['video.completed', 'video.exploded'] }, 'events', 'invalid_events'],
      ['a description that is too long', { url: 'https://hooks.example.com', events: ['video.failed'], description: 'x'.repeat(501) }, 'description', 'invalid_description'],
      ['an unknown field', { url: 'https://hooks.example.com', events: ['video.failed'], secret: 'whsec_mine' }, 'secret', 'unknown_parameter'],
    ])('refuses %s with 400 naming the parameter', async (_, body, param, code) => {
      const { key } = await customer();
      const res = await api.call('POST', '/v1/webhooks', { token: key, body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param, code });
    });

    it('updates events, URL, description and is_active, and deletes', async () => {
      const { key } = await customer();
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: 'https://a.example.com', events: ['video.completed'] } });
      const patched = await api.call('PATCH', `/v1/webhooks/${hook.id}`, {
        token: key,
        body: { events: ['video.failed'], url: 'https://b.example.com', description: 'moved', is_active: false },
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ events: ['video.failed'], url: 'https://b.example.com', description: 'moved', is_active: false });
      expect(patched.body.secret).toBeUndefined();
      const invalid = await api.call('PATCH', `/v1/webhooks/${hook.id}`, { token: key, body: { is_active: 'yes' } });
      expect(invalid.body.error).toMatchObject({ param: 'is_active', code: 'invalid_is_active' });
      const deleted = await api.call('DELETE', `/v1/webhooks/${hook.id}`, { token: key });
      expect(deleted.body).toEqual({ id: hook.id, object: 'webhook', deleted: true });
      expect((await api.call('GET', `/v1/webhooks/${hook.id}`, { token: key })).status).toBe(404);
      expect((await api.call('DELETE', `/v1/webhooks/${hook.id}`, { token: key })).status).toBe(404);
    });

    it("answers 404 for another organization's webhook, whatever the operation", async () => {
      const owner = await customer();
      const other = await customer();
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: owner.key, body: { url: 'https://a.example.com', events: ['video.completed'] } });
      for (const [method, path, body] of [
        ['GET', `/v1/webhooks/${hook.id}`],
        ['PATCH', `/v1/webhooks/${hook.id}`, { is_active: false }],
        ['DELETE', `/v1/webhooks/${hook.id}`],
        ['POST', `/v1/webhooks/${hook.id}/test`, {}],
        ['POST', `/v1/webhooks/${hook.id}/rotate-secret`, {}],
        ['GET', `/v1/webhooks/${hook.id}/deliveries`],
      ] as const) {
        const res = await api.call(method, path, { token: other.key, ...(body ? { body } : {}) });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe('resource_not_found');
      }
      expect((await api.call('GET', '/v1/webhooks', { token: other.key })).body.data).toEqual([]);
    });

    it('enforces scopes: reading needs webhook:read, writing and the test operation webhook:write', async () => {
      const reader = await api.newCustomer({ scopes: ['webhook:read'] });
      const res = await api.call('POST', '/v1/webhooks', { token: reader.key, body: { url: 'https://a.example.com', events: ['video.completed'] } });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'insufficient_scope', message: expect.stringContaining('webhook:write') });
      expect((await api.call('POST', '/v1/webhooks/wh_x/test', { token: reader.key, body: {} })).status).toBe(403);
      expect((await api.call('DELETE', '/v1/webhooks/wh_x', { token: reader.key })).status).toBe(403);
      for (const path of ['/v1/webhooks/wh_x/rotate-secret', '/v1/webhooks/wh_x/recover', '/v1/webhooks/wh_x/deliveries/dlv_x/retry']) {
        const refused = await api.call('POST', path, { token: reader.key, body: {} });
        expect(refused.body.error, path).toMatchObject({ code: 'insufficient_scope', message: expect.stringContaining('webhook:write') });
      }
      const writer = await api.newCustomer({ scopes: ['webhook:write'] });
      expect((await api.call('GET', '/v1/webhooks', { token: writer.key })).status).toBe(403);
      const log = await api.call('GET', '/v1/webhooks/wh_x/deliveries', { token: writer.key });
      expect(log.body.error).toMatchObject({ code: 'insufficient_scope', message: expect.stringContaining('webhook:read') });
    });

    it(`allows at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhooks per organization`, async () => {
      const { key } = await customer();
      for (let i = 0; i < MAX_WEBHOOKS_PER_ORGANIZATION; i++) {
        const res = await api.call('POST', '/v1/webhooks', { token: key, body: { url: `https://h${i}.example.com`, events: ['video.completed'] } });
        expect(res.status).toBe(200);
      }
      const over = await api.call('POST', '/v1/webhooks', { token: key, body: { url: 'https://more.example.com', events: ['video.completed'] } });
      expect(over.status).toBe(400);
      expect(over.body.error.code).toBe('webhook_limit_reached');
    });
  });

  describe('delivery', () => {
    it('delivers a video event to an HTTPS receiver, signed so that the stripe SDK accepts it', async () => {
      const { key, orgId } = await customer();
      const receiver = track(await httpsReceiver(tls));
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      const stored = await producer.emit('VideoCompleted', orgId, { id: `video_${mode.length}_https` });
      await waitFor(receiver, 1);
      const got = receiver.received[0]!;
      const event = stripe.webhooks.constructEvent(got.rawBody, String(got.headers['x-service-signature']), hook.secret);
      expect(event).toEqual({
        id: webhookEventId(stored.id),
        type: 'video.completed',
        created: Math.floor(stored.created / 1000),
        data: completedVideo({ id: `video_${mode.length}_https` }),
      });
      await eventually(async () => {
        const status = await api.call('GET', `/v1/webhooks/${hook.id}`, { token: key });
        expect(status.body).toMatchObject({ last_success_at: expect.any(Number), failure_count: 0 });
      });
    });

    it('retries a failing endpoint, logs each attempt, and resends on retry and recover', async () => {
      const { key, orgId } = await customer();
      const receiver = track(await httpReceiver(failWith(500)));
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.failed'] } });
      await producer.emit('VideoFailed', orgId, { id: 'video_retry', url: null, error: { code: 'timeout', message: 'too slow' } });
      await waitFor(receiver, RETRY_DELAYS_MS.length, 100);
      expect(receiver.received.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2']);
      expect(new Set(receiver.received.map((r) => r.headers['x-service-event-id'])).size).toBe(1);

      const log = async () => (await api.call('GET', `/v1/webhooks/${hook.id}/deliveries`, { token: key })).body;
      await eventually(async () => expect((await log()).data[0]).toMatchObject({ attempt: 2, delivery_status: 'failed' }));
      const attempts = await log();
      expect(attempts.data[1]).toEqual({
        id: expect.any(String),
        object: 'webhook_delivery_attempt',
        delivery_id: attempts.data[0].delivery_id,
        event_id: receiver.received[0]!.headers['x-service-event-id'],
        event_type: 'video.failed',
        attempt: 1,
        success: false,
        status_code: 500,
        duration_ms: expect.any(Number),
        error: 'HTTP 500',
        response_body: 'not today',
        delivery_status: 'pending',
        created: expect.any(Number),
      });
      const paged = await api.call('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1`, { token: key });
      expect(paged.body).toMatchObject({ data: [{ attempt: 2 }], has_more: true });
      expect((await api.call('GET', `/v1/webhooks/${hook.id}`, { token: key })).body).toMatchObject({ failure_count: 2, last_success_at: null });

      receiver.respond = okay;
      const retried = await api.call('POST', `/v1/webhooks/${hook.id}/deliveries/${attempts.data[0].delivery_id}/retry`, { token: key });
      expect(retried.status).toBe(200);
      expect(retried.body).toMatchObject({ id: attempts.data[0].delivery_id, status: 'pending' });
      await waitFor(receiver, 3);
      await eventually(async () => expect((await log()).data[0]).toMatchObject({ attempt: 3, success: true, delivery_status: 'succeeded' }));
      const again = await api.call('POST', `/v1/webhooks/${hook.id}/deliveries/${attempts.data[0].delivery_id}/retry`, { token: key });
      expect(again.body.error).toMatchObject({ code: 'delivery_not_failed', param: 'delivery_id' });

      const recover = await api.call('POST', `/v1/webhooks/${hook.id}/recover`, { token: key, body: { since: Math.floor(Date.now() / 1000) - 3_600 } });
      expect(recover.body).toMatchObject({ object: 'webhook_recovery', requeued: 0 });
      const tooOld = await api.call('POST', `/v1/webhooks/${hook.id}/recover`, { token: key, body: { since: 0 } });
      expect(tooOld.body.error).toMatchObject({ param: 'since', code: 'invalid_since' });
    });

    it('disables a webhook after 10 consecutive failed attempts and delivers again once PATCH re-enables it', async () => {
      const { key, orgId } = await customer();
      const receiver = track(await httpReceiver(failWith(503)));
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      for (let i = 0; i < 5; i++) await producer.emit('VideoCompleted', orgId, { id: `video_disable_${i}` });
      await eventually(async () => {
        elapse(100);
        const status = await api.call('GET', `/v1/webhooks/${hook.id}`, { token: key });
        expect(status.body).toMatchObject({ is_active: false, failure_count: 10 });
      });
      expect(receiver.received).toHaveLength(10);

      receiver.respond = okay;
      const enabled = await api.call('PATCH', `/v1/webhooks/${hook.id}`, { token: key, body: { is_active: true } });
      expect(enabled.body).toMatchObject({ is_active: true, failure_count: 0 });
      await producer.emit('VideoCompleted', orgId, { id: 'video_after_enable' });
      await waitFor(receiver, 11);
      expect(JSON.parse(receiver.received.at(-1)!.rawBody).data.id).toBe('video_after_enable');
    });

    it('answers the test operation with the endpoint’s status, without counting a failure', async () => {
      const { key } = await customer();
      const good = track(await httpsReceiver(tls));
      const bad = track(await httpReceiver(failWith(500)));
      const { body: goodHook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: good.url, events: ['video.completed'] } });
      const { body: badHook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: bad.url, events: ['video.completed'] } });

      const passed = await api.call('POST', `/v1/webhooks/${goodHook.id}/test`, { token: key });
      expect(passed.body).toEqual({ success: true, status_code: 204, response_time_ms: expect.any(Number), delivered_at: expect.any(Number) });
      const sent = good.received[0]!;
      expect(stripe.webhooks.constructEvent(sent.rawBody, String(sent.headers['x-service-signature']), goodHook.secret)).toMatchObject({
        type: 'video.completed',
        data: { status: 'completed', progress: 100, cost: { amount: expect.any(Number), currency: 'usd' } },
      });

      const failed = await api.call('POST', `/v1/webhooks/${badHook.id}/test`, { token: key, body: { event_type: 'video.processing' } });
      expect(failed.body).toEqual({ success: false, status_code: 500, response_time_ms: expect.any(Number), message: 'HTTP 500' });
      expect(JSON.parse(bad.received[0]!.rawBody)).toMatchObject({ type: 'video.processing', data: { status: 'in_progress', url: null } });
      expect((await api.call('GET', `/v1/webhooks/${badHook.id}`, { token: key })).body).toMatchObject({ failure_count: 0, last_failure_at: null });
      const unknown = await api.call('POST', `/v1/webhooks/${badHook.id}/test`, { token: key, body: { event_type: 'chat.done' } });
      expect(unknown.body.error).toMatchObject({ param: 'event_type', code: 'invalid_event_type' });
    });

    it('rotates the secret and signs with both secrets during the grace period', async () => {
      const { key, orgId } = await customer();
      const receiver = track(await httpReceiver());
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      const rotated = await api.call('POST', `/v1/webhooks/${hook.id}/rotate-secret`, { token: key });
      expect(rotated.body).toEqual({ id: hook.id, object: 'webhook_secret', secret: expect.stringMatching(/^whsec_/), previous_secret_expires_at: expect.any(Number) });
      await producer.emit('VideoCompleted', orgId, { id: 'video_rotated' });
      await waitFor(receiver, 1);
      const got = receiver.received[0]!;
      const header = String(got.headers['x-service-signature']);
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
      for (const secret of [hook.secret, rotated.body.secret]) expect(stripe.webhooks.constructEvent(got.rawBody, header, secret).type).toBe('video.completed');
    });

    it('loses no delivery when the webhook service dies, whether an attempt is in flight or a retry is waiting', async () => {
      const { key, orgId } = await customer();
      let beforeCrash = true;
      const receiver = track(
        await httpReceiver((req, res) => {
          if (!beforeCrash) return void res.writeHead(200).end();
          // Before the crash one event's attempt fails (a retry then waits) and the other's never gets an answer.
          if (JSON.parse(req.rawBody).data.id === 'video_waiting') res.writeHead(500).end();
        }),
      );
      const { body: hook } = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      const waiting = await producer.emit('VideoCompleted', orgId, { id: 'video_waiting' });
      await eventually(async () => {
        const log = await api.call('GET', `/v1/webhooks/${hook.id}/deliveries`, { token: key });
        expect(log.body.data).toMatchObject([{ attempt: 1, delivery_status: 'pending' }]);
      });
      const inFlight = await producer.emit('VideoCompleted', orgId, { id: 'video_in_flight' });
      await waitFor(receiver, 2);

      beforeCrash = false;
      if (service.crash) await service.crash('webhook');
      else await service.restart();
      await waitFor(receiver, 4, 100);
      const after = receiver.received.slice(2).map((r) => [r.headers['x-service-event-id'], r.headers['x-service-delivery-attempt']]);
      expect(after).toEqual(
        expect.arrayContaining([
          [webhookEventId(waiting.id), '2'],
          [webhookEventId(inFlight.id), expect.any(String)],
        ]),
      );
      await eventually(async () => {
        const log = await api.call('GET', `/v1/webhooks/${hook.id}/deliveries`, { token: key });
        expect(log.status).toBe(200);
        expect(log.body.data.filter((a: { delivery_status: string }) => a.delivery_status === 'succeeded')).toHaveLength(2);
      });
    });

    it('delivers a video event published while the webhook service was down, once it is back', async () => {
      const { key, orgId } = await customer();
      const receiver = track(await httpReceiver());
      await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.processing'] } });
      // Distributed: the process is still starting when the event is published, so only the durable consumer can bring it.
      if (service.crash) await service.crash('webhook');
      else await service.restart();
      const stored = await producer.emit('VideoProcessing', orgId, { id: 'video_while_down', status: 'in_progress', progress: 10, url: null });
      await waitFor(receiver, 1);
      expect(receiver.received[0]!.headers['x-service-event-id']).toBe(webhookEventId(stored.id));
    });
  });
});
