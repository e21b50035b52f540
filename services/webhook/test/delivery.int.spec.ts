import { createHmac, timingSafeEqual } from 'node:crypto';
import { Writable } from 'node:stream';
import { type WebhookEventType, webhookEventId } from '@oc/contracts';
import { pino } from 'pino';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  completedVideo,
  httpReceiver,
  httpsReceiver,
  type InProcessWebhook,
  type Receiver,
  startInProcess,
  type TestCa,
  testCertificates,
  testSettings,
} from './support';
import { Deliveries } from '../src/application/deliveries';

const stripe = new Stripe('sk_test_unused');
const ORG = 'org_1';

/** The spec's three steps, by hand: parse `t` and every `v1`, check the 300 s tolerance, compare in constant time. */
function verifySpecSignature(rawBody: string, header: string, secret: string, nowSeconds: number): boolean {
  const parts = header.split(',').map((p) => p.split('=') as [string, string]);
  const t = parts.find(([k]) => k === 't')?.[1];
  const candidates = parts.filter(([k]) => k === 'v1').map(([, v]) => v);
  if (!t || candidates.length === 0) return false;
  if (Math.abs(nowSeconds - Number(t)) > 300) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${t}.${rawBody}`).digest('hex'));
  return candidates.some((c) => c.length === expected.length && timingSafeEqual(Buffer.from(c), expected));
}

let tls: TestCa;
beforeAll(async () => {
  tls = await testCertificates();
});

let running: InProcessWebhook | undefined;
const receivers: Receiver[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await running?.close();
  running = undefined;
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function start(overrides: Parameters<typeof testSettings>[0] = {}) {
  running = await startInProcess(testSettings({ ca: [tls.ca], ...overrides }));
  return running;
}
const track = <R extends Receiver>(r: R) => {
  receivers.push(r);
  return r;
};
const failing = (status = 500) => (_req: unknown, res: import('node:http').ServerResponse) => {
  res.writeHead(status).end('receiver says no');
};

async function register(
  w: InProcessWebhook,
  url: string,
  events: WebhookEventType[] = ['video.completed', 'video.failed', 'video.processing'],
  orgId = ORG,
) {
  return w.app.service.create({ org_id: orgId, url, events });
}

describe('delivery of video events', () => {
  it('POSTs the envelope over HTTPS, signed so that the stripe SDK, Standard Webhooks and the spec steps all verify it', async () => {
    const w = await start();
    const receiver = track(await httpsReceiver(tls));
    const hook = await register(w, receiver.url);
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(hook.secret.slice(6), 'base64')).toHaveLength(32);

    const stored = await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));
    const [got] = receiver.received;
    const header = String(got!.headers['x-service-signature']);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);

    const event = stripe.webhooks.constructEvent(got!.rawBody, header, hook.secret);
    expect(event).toEqual({
      id: webhookEventId(stored.id),
      type: 'video.completed',
      created: Math.floor(stored.created / 1000),
      data: completedVideo(),
    });
    expect(() => stripe.webhooks.constructEvent(got!.rawBody, header, 'whsec_wrong')).toThrow();
    expect(verifySpecSignature(got!.rawBody, header, hook.secret, Math.floor(Date.now() / 1000))).toBe(true);
    expect(verifySpecSignature(`${got!.rawBody} `, header, hook.secret, Math.floor(Date.now() / 1000))).toBe(false);
    expect(verifySpecSignature(got!.rawBody, header, hook.secret, Math.floor(Date.now() / 1000) + 301)).toBe(false);

    const standard = new StandardWebhook(hook.secret).verify(got!.rawBody, {
      'webhook-id': String(got!.headers['webhook-id']),
      'webhook-timestamp': String(got!.headers['webhook-timestamp']),
      'webhook-signature': String(got!.headers['webhook-signature']),
    });
    expect(standard).toEqual(event);
    expect(got!.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'OC-Webhooks/0.1.0',
      'x-service-event-id': webhookEventId(stored.id),
      'x-service-event-type': 'video.completed',
      'x-service-delivery-attempt': '1',
      'webhook-id': webhookEventId(stored.id),
    });
    await w.until(async () =>
      expect(await w.app.service.get({ org_id: ORG, webhook_id: hook.id })).toMatchObject({
        last_success_at: Math.floor(w.clock.now() / 1000),
        failure_count: 0,
      }),
    );
  });

  it('sends a new delivery at once: its first attempt waits for no timer', async () => {
    const w = await start();
    const receiver = track(await httpReceiver());
    await register(w, receiver.url);
    await w.emitVideo('VideoCompleted', ORG);
    // No timers.fire() here (until() would fire them): nothing but the event itself starts the attempt.
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 5_000, interval: 5 });
    expect(w.timers.next).toBeUndefined();
  });

  it('delivers only subscribed types, only to the organization of the video, and never to an inactive webhook', async () => {
    const w = await start();
    const completedOnly = track(await httpReceiver());
    const everything = track(await httpReceiver());
    const otherOrg = track(await httpReceiver());
    const inactive = track(await httpReceiver());
    await register(w, completedOnly.url, ['video.completed']);
    await register(w, everything.url);
    await register(w, otherOrg.url, ['video.completed', 'video.failed'], 'org_2');
    const off = await register(w, inactive.url);
    await w.app.service.update({ org_id: ORG, webhook_id: off.id, changes: { is_active: false } });

    await w.emitVideo('VideoFailed', ORG, { id: 'video_f', url: null, error: { code: 'timeout', message: 'took too long' } });
    await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(everything.received).toHaveLength(2));
    await w.until(() => expect(completedOnly.received).toHaveLength(1));
    expect(JSON.parse(completedOnly.received[0]!.rawBody).type).toBe('video.completed');
    expect(everything.received.map((r) => JSON.parse(r.rawBody).type)).toEqual(['video.failed', 'video.completed']);
    expect(otherOrg.received).toHaveLength(0);
    expect(inactive.received).toHaveLength(0);
  });

  it('retries at once, then after 1 s, 5 s and 25 s, and marks the delivery failed after the 4th failed attempt', async () => {
    const w = await start();
    const receiver = track(await httpReceiver(failing(503)));
    const hook = await register(w, receiver.url);
    const t0 = w.clock.now();
    await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));

    for (const [n, delay] of [[2, 1_000], [3, 5_000], [4, 25_000]] as const) {
      await w.until(() => expect(w.timers.next).toBe(w.clock.now() + delay));
      w.timers.advance(delay - 1);
      expect(receiver.received).toHaveLength(n - 1);
      w.timers.advance(1);
      await w.until(() => expect(receiver.received).toHaveLength(n));
      expect(receiver.received[n - 1]!.headers['x-service-delivery-attempt']).toBe(String(n));
    }
    expect(w.clock.now() - t0).toBe(31_000);
    const ids = new Set(receiver.received.map((r) => JSON.parse(r.rawBody).id));
    expect(ids.size).toBe(1);

    await w.until(async () => {
      const log = await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 });
      expect(log.data.map((a) => [a.attempt, a.status_code, a.delivery_status])).toEqual([
        [4, 503, 'failed'],
        [3, 503, 'pending'],
        [2, 503, 'pending'],
        [1, 503, 'pending'],
      ]);
      expect(log.data[0]).toMatchObject({ success: false, error: 'HTTP 503', response_body: 'receiver says no', event_type: 'video.completed' });
    });
    w.timers.advance(3_600_000);
    expect(receiver.received).toHaveLength(4);
    // The webhook's own counters come from its stream, recorded beside the delivery's.
    await w.until(async () =>
      expect(await w.app.service.get({ org_id: ORG, webhook_id: hook.id })).toMatchObject({
        failure_count: 4,
        last_failure_at: expect.any(Number),
        last_success_at: null,
        is_active: true,
      }),
    );
  });

  it('disables the webhook after 10 consecutive failed attempts, then delivers nothing until PATCH re-enables it', async () => {
    const w = await start({ retryDelaysMs: [0, 1_000] });
    const receiver = track(await httpReceiver(failing(500)));
    const hook = await register(w, receiver.url);
    for (let i = 0; i < 5; i++) {
      await w.emitVideo('VideoCompleted', ORG, { id: `video_${i}` });
      await w.until(() => expect(receiver.received).toHaveLength(2 * i + 1));
      // The retry is on the schedule only once the first attempt is recorded.
      await w.until(() => expect(w.timers.next).toBe(w.clock.now() + 1_000));
      w.timers.advance(1_000);
      await w.until(() => expect(receiver.received).toHaveLength(2 * i + 2));
    }
    await w.until(async () =>
      expect(await w.app.service.get({ org_id: ORG, webhook_id: hook.id })).toMatchObject({ is_active: false, failure_count: 10 }),
    );
    const disabled = (await w.store.readStream(`webhook-${hook.id}`)).filter((e) => e.type === 'WebhookDisabled');
    expect(disabled.map((e) => e.data)).toEqual([{ webhook_id: hook.id, org_id: ORG, reason: 'consecutive_failures' }]);

    await w.emitVideo('VideoCompleted', ORG, { id: 'video_while_disabled' });
    w.timers.advance(60_000);
    await new Promise((r) => setImmediate(r));
    expect(receiver.received).toHaveLength(10);

    receiver.respond = (_req, res) => {
      res.writeHead(200).end('ok');
    };
    const enabled = await w.app.service.update({ org_id: ORG, webhook_id: hook.id, changes: { is_active: true } });
    expect(enabled).toMatchObject({ is_active: true, failure_count: 0 });
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_after' });
    await w.until(() => expect(receiver.received).toHaveLength(11));
    expect(JSON.parse(receiver.received[10]!.rawBody).data.id).toBe('video_after');
  });

  it('fails the deliveries waiting for a retry as soon as the webhook is auto-disabled, logs them as not sent, and resends them once re-enabled', async () => {
    const w = await start({ retryDelaysMs: [0, 1_000, 5_000], disableAfterFailures: 2 });
    const receiver = track(await httpReceiver(failing(500)));
    const hook = await register(w, receiver.url);
    const log = async () => (await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data;
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_1' });
    await w.until(() => expect(receiver.received).toHaveLength(1));
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_2' });
    await w.until(() => expect(receiver.received).toHaveLength(2));

    // The second failure disabled the webhook with both deliveries waiting for their second attempt: the clock
    // has not moved, yet each delivery's newest row already says how it ended, and why.
    await w.until(async () => expect(await w.app.service.get({ org_id: ORG, webhook_id: hook.id })).toMatchObject({ is_active: false }));
    await w.until(async () =>
      expect((await log()).map((a) => [a.event_id, a.attempt, a.status_code, a.error, a.delivery_status])).toEqual([
        [expect.any(String), 2, null, 'not sent: the webhook was disabled', 'failed'],
        [expect.any(String), 2, null, 'not sent: the webhook was disabled', 'failed'],
        [expect.any(String), 1, 500, 'HTTP 500', 'pending'],
        [expect.any(String), 1, 500, 'HTTP 500', 'pending'],
      ]),
    );
    w.timers.advance(60_000);
    await new Promise((r) => setImmediate(r));
    expect(receiver.received).toHaveLength(2);
    expect(await log()).toHaveLength(4);

    const [notSent] = await log();
    await expect(w.app.service.retryDelivery({ org_id: ORG, webhook_id: hook.id, delivery_id: notSent!.delivery_id })).rejects.toMatchObject({
      code: 'webhook_inactive',
    });
    receiver.respond = (_req, res) => {
      res.writeHead(200).end();
    };
    await w.app.service.update({ org_id: ORG, webhook_id: hook.id, changes: { is_active: true } });
    const retried = await w.app.service.retryDelivery({ org_id: ORG, webhook_id: hook.id, delivery_id: notSent!.delivery_id });
    expect(retried).toMatchObject({ status: 'pending', event_id: notSent!.event_id });
    await w.until(() => expect(receiver.received).toHaveLength(3));
    expect(JSON.parse(receiver.received[2]!.rawBody).id).toBe(notSent!.event_id);
    expect(receiver.received[2]!.headers['x-service-delivery-attempt']).toBe('2');
    await w.until(async () => expect((await log())[0]).toMatchObject({ delivery_id: notSent!.delivery_id, attempt: 2, status_code: 200, delivery_status: 'succeeded' }));
    // The other one is still there to resend, alone or with recover.
    expect(await w.app.service.recover({ org_id: ORG, webhook_id: hook.id, since: Math.floor(w.clock.now() / 1000) - 60 })).toMatchObject({ requeued: 1 });
    await w.until(() => expect(receiver.received).toHaveLength(4));
  });

  it('fails the deliveries waiting for a retry when the owner disables the webhook', async () => {
    const w = await start();
    const receiver = track(await httpReceiver(failing(503)));
    const hook = await register(w, receiver.url);
    await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));
    await w.until(() => expect(w.timers.next).toBe(w.clock.now() + 1_000));
    await w.app.service.update({ org_id: ORG, webhook_id: hook.id, changes: { is_active: false } });
    const log = (await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data;
    expect(log.map((a) => [a.attempt, a.status_code, a.error, a.delivery_status])).toEqual([
      [2, null, 'not sent: the webhook was disabled', 'failed'],
      [1, 503, 'HTTP 503', 'pending'],
    ]);
  });

  it('resumes a delivery that was between retries when the service stopped', async () => {
    const w = await start();
    const receiver = track(await httpReceiver(failing(500)));
    await register(w, receiver.url);
    await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));
    await w.until(() => expect(w.timers.next).toBe(w.clock.now() + 1_000));

    receiver.respond = (_req, res) => {
      res.writeHead(204).end();
    };
    await w.restart();
    w.timers.advance(999);
    expect(receiver.received).toHaveLength(1);
    w.timers.advance(1);
    await w.until(() => expect(receiver.received).toHaveLength(2));
    expect(receiver.received[1]!.headers['x-service-delivery-attempt']).toBe('2');
    expect(JSON.parse(receiver.received[1]!.rawBody).id).toBe(JSON.parse(receiver.received[0]!.rawBody).id);
  });

  it('does not let a slow endpoint delay deliveries to another one', async () => {
    const w = await start();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = track(
      await httpReceiver(async (_req, res) => {
        await held;
        res.writeHead(204).end();
      }),
    );
    const fast = track(await httpReceiver());
    await register(w, slow.url);
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_1' });
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_2' });
    await w.until(() => expect(slow.received).toHaveLength(1));
    await register(w, fast.url);
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_3' });
    await w.until(() => expect(fast.received).toHaveLength(1));
    // One attempt at a time per endpoint: the second event waits for the first, not for the other endpoint.
    expect(slow.received).toHaveLength(1);
    release();
    await w.until(() => expect(slow.received).toHaveLength(3));
  });

  it('signs with both secrets during the grace period after a rotation, then with the new one only', async () => {
    const w = await start();
    const receiver = track(await httpReceiver());
    const hook = await register(w, receiver.url);
    const rotated = await w.app.service.rotateSecret({ org_id: ORG, webhook_id: hook.id });
    expect(rotated.secret).not.toBe(hook.secret);
    expect(rotated.previous_secret_expires_at).toBe(Math.floor(w.clock.now() / 1000) + 86_400);

    await w.emitVideo('VideoCompleted', ORG, { id: 'video_1' });
    await w.until(() => expect(receiver.received).toHaveLength(1));
    const during = receiver.received[0]!;
    const header = String(during.headers['x-service-signature']);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(stripe.webhooks.constructEvent(during.rawBody, header, hook.secret).id).toBeDefined();
    expect(stripe.webhooks.constructEvent(during.rawBody, header, rotated.secret).id).toBeDefined();
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);

    w.timers.advance(86_400_000);
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_2' });
    await w.until(() => expect(receiver.received).toHaveLength(2));
    const after = receiver.received[1]!;
    const afterHeader = String(after.headers['x-service-signature']);
    const t = Number(/t=(\d+)/.exec(afterHeader)![1]);
    expect(afterHeader.match(/v1=/g)).toHaveLength(1);
    expect(verifySpecSignature(after.rawBody, afterHeader, rotated.secret, t)).toBe(true);
    expect(verifySpecSignature(after.rawBody, afterHeader, hook.secret, t)).toBe(false);
  });

  it('keeps secrets sealed in the event store and out of the logs', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'trace' },
      new Writable({
        write(chunk, _enc, cb) {
          lines.push(String(chunk));
          cb();
        },
      }),
    );
    running = await startInProcess(testSettings(), { logger });
    const w = running;
    const receiver = track(await httpReceiver(failing(500)));
    const hook = await register(w, receiver.url);
    const rotated = await w.app.service.rotateSecret({ org_id: ORG, webhook_id: hook.id });
    await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));
    const everything = JSON.stringify(await w.store.readAll({ maxCount: 10_000 }));
    for (const secret of [hook.secret, rotated.secret]) {
      expect(everything).not.toContain(secret.slice(6));
      expect(lines.join('')).not.toContain(secret.slice(6));
    }
    expect(everything).toContain('"secret":"v1.');
  });

  it('answers the test operation with what the endpoint said, without counting a failure toward auto-disable', async () => {
    const w = await start();
    const good = track(await httpsReceiver(tls));
    const bad = track(await httpReceiver(failing(500)));
    const goodHook = await register(w, good.url);
    const badHook = await register(w, bad.url);

    const passed = await w.app.service.test({ org_id: ORG, webhook_id: goodHook.id, event_type: 'video.failed' });
    expect(passed).toEqual({ success: true, status_code: 204, response_time_ms: expect.any(Number), delivered_at: Math.floor(w.clock.now() / 1000) });
    const sent = good.received[0]!;
    const event = stripe.webhooks.constructEvent(sent.rawBody, String(sent.headers['x-service-signature']), goodHook.secret);
    expect(event).toMatchObject({ type: 'video.failed', id: expect.stringMatching(/^evt_test/), data: { status: 'failed', url: null, error: { code: expect.any(String) } } });

    const failed = await w.app.service.test({ org_id: ORG, webhook_id: badHook.id, event_type: 'video.completed' });
    expect(failed).toEqual({ success: false, status_code: 500, response_time_ms: expect.any(Number), message: 'HTTP 500' });
    expect(await w.app.service.get({ org_id: ORG, webhook_id: badHook.id })).toMatchObject({ failure_count: 0, last_failure_at: null });
    await expect(w.app.service.test({ org_id: 'org_2', webhook_id: goodHook.id, event_type: 'video.completed' })).rejects.toMatchObject({
      detail: { kind: 'NotFound' },
    });
  });

  it('retries one failed delivery on request, and recovers every failure since a time', async () => {
    const w = await start({ retryDelaysMs: [0] });
    const receiver = track(await httpReceiver(failing(500)));
    const hook = await register(w, receiver.url);
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_1' });
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_2' });
    await w.until(() => expect(receiver.received).toHaveLength(2));
    const log = async () => (await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data;
    await w.until(async () => expect((await log()).filter((a) => a.delivery_status === 'failed')).toHaveLength(2));

    receiver.respond = (_req, res) => {
      res.writeHead(200).end();
    };
    const first = (await log()).at(-1)!;
    const retried = await w.app.service.retryDelivery({ org_id: ORG, webhook_id: hook.id, delivery_id: first.delivery_id });
    expect(retried).toMatchObject({ id: first.delivery_id, status: 'pending', event_id: first.event_id });
    await w.until(() => expect(receiver.received).toHaveLength(3));
    expect(JSON.parse(receiver.received[2]!.rawBody).id).toBe(first.event_id);
    await expect(
      w.app.service.retryDelivery({ org_id: ORG, webhook_id: hook.id, delivery_id: first.delivery_id }),
    ).rejects.toMatchObject({ detail: { code: 'delivery_not_failed' } });

    const recovered = await w.app.service.recover({ org_id: ORG, webhook_id: hook.id, since: Math.floor(w.clock.now() / 1000) - 60 });
    expect(recovered).toMatchObject({ requeued: 1 });
    await w.until(() => expect(receiver.received).toHaveLength(4));
    await expect(
      w.app.service.recover({ org_id: ORG, webhook_id: hook.id, since: Math.floor(w.clock.now() / 1000) - 15 * 86_400 }),
    ).rejects.toMatchObject({ code: 'invalid_since', param: 'since' });
  });

  it('answers a retry with the delivery as the retry left it, even when the new attempt is recorded first', async () => {
    const w = await start({ retryDelaysMs: [0] });
    const receiver = track(await httpReceiver(failing(500)));
    const hook = await register(w, receiver.url);
    await w.emitVideo('VideoCompleted', ORG, { id: 'video_1' });
    const log = async () => (await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data;
    await w.until(async () => expect((await log())[0]).toMatchObject({ delivery_status: 'failed' }));
    const failed = (await log())[0]!;
    receiver.respond = (_req, res) => {
      res.writeHead(200).end();
    };
    // The new attempt, due at once, is made and recorded before the answer is put together.
    const requeue = Deliveries.prototype.requeue;
    vi.spyOn(Deliveries.prototype, 'requeue').mockImplementation(async function (this: Deliveries, ...args) {
      const result = await requeue.apply(this, args);
      await w.until(async () => expect((await log())[0]).toMatchObject({ delivery_status: 'succeeded' }));
      return result;
    });

    const retried = await w.app.service.retryDelivery({ org_id: ORG, webhook_id: hook.id, delivery_id: failed.delivery_id });
    expect(retried).toMatchObject({ id: failed.delivery_id, status: 'pending', attempts: 1, next_attempt_at: Math.floor(w.clock.now() / 1000) });
  });

  it('keeps one webhook per event however often the bus redelivers the event', async () => {
    const w = await start();
    const receiver = track(await httpReceiver());
    const hook = await register(w, receiver.url);
    const stored = await w.emitVideo('VideoCompleted', ORG);
    await w.until(() => expect(receiver.received).toHaveLength(1));
    // The delivery log is a read model: it shows the first delivery before the event comes again.
    await w.until(async () => expect((await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data).toHaveLength(1));
    await w.app.onVideoEvent(stored);
    w.timers.advance(60_000);
    await new Promise((r) => setImmediate(r));
    expect(receiver.received).toHaveLength(1);
    expect((await w.app.service.listDeliveries({ org_id: ORG, webhook_id: hook.id, limit: 10 })).data).toHaveLength(1);
  });

  it.each([
    'https://169.254.169.254/latest/meta-data/',
    'https://127.0.0.1/x',
    'https://localhost/x',
    'https://10.0.0.1/x',
    'https://[::1]/x',
    'https://2130706433/x',
    'https://0x7f.1/x',
    'https://example.com@127.0.0.1/x',
    'https://100.64.0.1/x',
    'https://[fd00::1]/x',
    'https://[::ffff:127.0.0.1]/x',
    'https://[::127.0.0.1]/x',
    'https://[::a00:1]/x',
    'https://[64:ff9b::a9fe:a9fe]/x',
    'https://[2002:a00:1::]/x',
    'https://internal.example/x',
    'https://compatible.example/x',
  ])('refuses, at registration and on update, a URL that can only reach a non-public address (%s)', async (url) => {
    const w = await start({ allowPrivate: false });
    const refused = w.app.service.create({ org_id: ORG, url, events: ['video.completed'] });
    await expect(refused).rejects.toMatchObject({ status: 400, code: 'invalid_url', param: 'url' });
    await expect(refused).rejects.not.toMatchObject({ message: expect.stringMatching(/10\.0\.0\.7|127\.0\.0\.1/) });
    const hook = await w.app.service.create({ org_id: ORG, url: 'https://hooks.example.com/x', events: ['video.completed'] });
    await expect(w.app.service.update({ org_id: ORG, webhook_id: hook.id, changes: { url } })).rejects.toMatchObject({
      code: 'invalid_url',
    });
  });

  it('lets development receivers on loopback through, and other private ranges only when listed', async () => {
    const dev = await start({ allowPrivate: true });
    const create = (w: typeof dev, url: string) => w.app.service.create({ org_id: ORG, url, events: ['video.completed'] });
    await expect(create(dev, 'http://127.0.0.1:9/x')).resolves.toMatchObject({ url: 'http://127.0.0.1:9/x' });
    await expect(create(dev, 'http://localhost:9/x')).resolves.toMatchObject({ url: 'http://localhost:9/x' });
    await expect(create(dev, 'http://[::127.0.0.1]:9/x')).resolves.toMatchObject({ url: 'http://[::127.0.0.1]:9/x' });
    for (const url of ['https://10.0.0.1/x', 'https://169.254.169.254/x', 'https://100.64.0.1/x', 'https://192.168.1.1/x', 'https://[::a00:1]/x']) {
      await expect(create(dev, url)).rejects.toMatchObject({ code: 'invalid_url' });
    }
    await dev.close();
    const listed = await start({ allowPrivate: true, allowCidrs: ['10.0.0.0/8'] });
    await expect(create(listed, 'https://10.0.0.1/x')).resolves.toMatchObject({ url: 'https://10.0.0.1/x' });
    await expect(create(listed, 'https://192.168.1.1/x')).rejects.toMatchObject({ code: 'invalid_url' });
  });

  it('accepts only https:// URLs in production mode, and says how local receivers work', async () => {
    const w = await start({ allowPrivate: false });
    await expect(w.app.service.create({ org_id: ORG, url: 'http://hooks.example.com/x', events: ['video.completed'] })).rejects.toMatchObject({
      status: 400,
      code: 'invalid_url',
      param: 'url',
      message: expect.stringMatching(/must use https:\/\/\. .*WEBHOOK_MODE=development and WEBHOOK_ALLOW_PRIVATE=1 .*accepts http:\/\/ and loopback URLs/),
    });
    const hook = await w.app.service.create({ org_id: ORG, url: 'https://hooks.example.com/x', events: ['video.completed'] });
    await expect(
      w.app.service.update({ org_id: ORG, webhook_id: hook.id, changes: { url: 'http://hooks.example.com/y' } }),
    ).rejects.toMatchObject({ code: 'invalid_url' });
  });
});
