import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBilling } from '@oc/billing';
import {
  type CreatedApiKey,
  eventStreamSubject,
  ManualClock,
  sortableIds,
  Subjects,
  unwrap,
  type WebhookEnvelope,
  type VideoWebhookEventType,
  WebhookMessages,
} from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EventFeed } from '../../webhook/src/application/event-feed';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { eventStreamRoute } from '../src/transport/event-stream-routes';
import { createGatewayApp } from '../src/transport/http';

/**
 * The gateway's side of `GET /v1/webhooks/events/stream`, against the webhook service's feed (its ring and its
 * replay answer) on the in-process bus: isolation between organizations, resuming after Last-Event-ID, the
 * bound on a listener that does not keep up, and keys that stop being valid while a stream is open.
 */
const logger = createLogger({ service: 'gateway-test', level: 'silent' });
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const services = new InProcessServiceClient(broker);
const feed = new EventFeed(services, 50, logger);
/** The webhook service's answer to a replay, as its controller gives it; unregistered, the service is away. */
const serveReplay = () =>
  broker.respond(Subjects.webhook.replayEvents, async (data) => {
    const m = WebhookMessages.replayEvents.parse(data);
    await beforeReplay?.(m.org_id);
    return { ok: true, data: feed.replay({ orgId: m.org_id, after: m.after, types: m.types, limit: 3 }) };
  });
/** Runs while the webhook service answers a stream's first question, before the stream has begun. */
let beforeReplay: ((orgId: string) => Promise<void>) | undefined;
let unregisterReplay: () => void;
let server: Server;
let url: string;
let closeAll: () => Promise<void>;

interface Customer {
  orgId: string;
  key: string;
  keyId: string;
}
let acme: Customer;
let globex: Customer;

async function customer(name: string, key: Record<string, unknown> = {}): Promise<Customer> {
  const org = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name, tier: 'enterprise' }));
  const created = unwrap(
    await services.request<CreatedApiKey>(Subjects.billing.createApiKey, {
      org_id: org.id,
      name: 'k',
      mode: 'live',
      scopes: ['webhook:read'],
      ...key,
    }),
  );
  return { orgId: org.id, key: created.key, keyId: created.id };
}

beforeAll(async () => {
  const billing = await createBilling({ eventStore: stores.store, readModels: new SqliteReadModelStore({ filename: ':memory:' }), client: services, clock, ids: sortableIds, logger });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  unregisterReplay = serveReplay();
  const app = createGatewayApp({
    services,
    authenticator: new KeyAuthenticator(services, clock),
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger,
    adminToken: 'admin-token-for-tests',
    version: '1.2.3',
    v1: [eventStreamRoute({ now: () => clock.now(), heartbeatMs: 20, maxBufferedBytes: 64 * 1024, maxStreamsPerOrganization: 3 })],
    admin: [],
    ready: async () => {},
  });
  server = await new Promise<Server>((resolve) => {
    const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  acme = await customer('Acme');
  globex = await customer('Globex');
  closeAll = async () => {
    server.closeAllConnections();
    server.close();
    await billingApp.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => closeAll());

let sequence = 0;
/** What the webhook service does with each video event it consumes. */
function emit(orgId: string, type: VideoWebhookEventType = 'video.completed', prompt = 'A paper boat drifting down a rainy street'): WebhookEnvelope {
  const n = ++sequence;
  const envelope: WebhookEnvelope = {
    id: `evt_${String(n).padStart(8, '0')}`,
    type,
    created: 1_795_000_000 + n,
    data: { id: `video_${n}`, object: 'video', created: 1_795_000_000, model: 'video-2', prompt, status: 'completed', progress: 100, url: null },
  };
  feed.publish({ orgId, envelope });
  return envelope;
}

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** A stream as a listener reads it: its events one by one, comments included. */
async function open(who: Customer, options: { lastEventId?: string; query?: string; signal?: AbortSignal } = {}) {
  const res = await fetch(`${url}/v1/webhooks/events/stream${options.query ?? ''}`, {
    headers: { authorization: `Bearer ${who.key}`, ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}) },
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const ready: SseEvent[] = [];
  let ended = false;
  async function next(): Promise<SseEvent | undefined> {
    for (;;) {
      const boundary = buffer.indexOf('\n\n');
      if (boundary >= 0) {
        const block = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary + 2);
        const event: SseEvent = {};
        for (const line of block.split('\n')) {
          const [field, ...rest] = line.split(':');
          const value = rest.join(':').replace(/^ /, '');
          if (field === '') event.comment = value;
          else (event as Record<string, string>)[field!] = value;
        }
        return event;
      }
      if (ended) return undefined;
      const { value, done } = await reader.read();
      if (done) ended = true;
      else buffer += decoder.decode(value, { stream: true });
    }
  }
  /** The next event that is not a comment or a `retry:` line. */
  async function event(): Promise<SseEvent | undefined> {
    for (;;) {
      const e = await next();
      if (!e || e.event || e.id) return e;
    }
  }
  return { res, next, event, ready, cancel: () => reader.cancel() };
}

describe('the event stream through the gateway', () => {
  it("sends the organization's events, and nothing of another organization's, as the body a delivery carries", async () => {
    const stream = await open(acme);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(stream.res.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
    expect(await stream.next()).toEqual({ retry: '3000' });
    const ready = await stream.event();
    expect(ready?.event).toBe('ready');
    expect(JSON.parse(ready!.data!)).toEqual({
      object: 'webhook_event_stream',
      organization_id: acme.orgId,
      events: ['video.processing', 'video.completed', 'video.failed'],
      resumed_after: null,
    });

    emit(globex.orgId);
    // Even a message on this organization's subject that names another organization is not passed on.
    broker.publish(eventStreamSubject(acme.orgId), { org_id: globex.orgId, event: { ...emit(globex.orgId), id: 'evt_forged' } });
    const mine = emit(acme.orgId, 'video.processing');
    const event = await stream.event();
    expect(event).toEqual({ id: mine.id, event: 'video.processing', data: JSON.stringify(mine) });
    await stream.cancel();
  });

  it('writes each event once when every webhook replica broadcasts it, in the order they broadcast', async () => {
    const stream = await open(acme);
    await stream.event();
    const first = emit(acme.orgId);
    const second = emit(acme.orgId, 'video.failed');
    // The other replica's copies, following its own feed of the same events in the same order.
    broker.publish(eventStreamSubject(acme.orgId), { org_id: acme.orgId, event: first });
    broker.publish(eventStreamSubject(acme.orgId), { org_id: acme.orgId, event: second });
    const third = emit(acme.orgId);
    broker.publish(eventStreamSubject(acme.orgId), { org_id: acme.orgId, event: third });
    const ids = [(await stream.event())!.id, (await stream.event())!.id, (await stream.event())!.id];
    expect(ids).toEqual([first.id, second.id, third.id]);
    const fourth = emit(acme.orgId);
    expect((await stream.event())!.id).toBe(fourth.id);
    await stream.cancel();
  });

  it('sends only the types asked for, and refuses an unknown type or a malformed Last-Event-ID with 400', async () => {
    const stream = await open(acme, { query: '?events=video.failed' });
    await stream.event();
    emit(acme.orgId, 'video.completed');
    const failed = emit(acme.orgId, 'video.failed');
    expect((await stream.event())?.id).toBe(failed.id);
    await stream.cancel();

    const unknown = await fetch(`${url}/v1/webhooks/events/stream?events=video.completed,video.deleted`, { headers: { authorization: `Bearer ${acme.key}` } });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as any).error).toMatchObject({ code: 'invalid_events', param: 'events' });
    const malformed = await fetch(`${url}/v1/webhooks/events/stream`, { headers: { authorization: `Bearer ${acme.key}`, 'last-event-id': 'x\u00e9' } });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as any).error).toMatchObject({ code: 'invalid_last_event_id', param: 'Last-Event-ID' });
  });

  it('resumes after Last-Event-ID: what was missed, page after page, then live, each event once', async () => {
    const seen = emit(acme.orgId);
    const missed = [emit(acme.orgId), emit(globex.orgId), emit(acme.orgId, 'video.failed'), emit(acme.orgId), emit(acme.orgId), emit(acme.orgId)];
    const stream = await open(acme, { lastEventId: seen.id });
    const ready = await stream.event();
    expect(JSON.parse(ready!.data!).resumed_after).toBe(seen.id);
    const live = emit(acme.orgId);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await stream.event())!.id!);
    const acmeMissed = missed.filter((_, i) => i !== 1).map((e) => e.id);
    expect(ids).toEqual([...acmeMissed, live.id]);
    await stream.cancel();
  });

  it('says so when the Last-Event-ID is no longer held, or is another organization’s', async () => {
    const theirs = emit(globex.orgId);
    for (const lastEventId of ['evt_long0gone', theirs.id]) {
      const stream = await open(acme, { lastEventId });
      expect((await stream.event())?.event).toBe('ready');
      const gap = await stream.event();
      expect(gap?.event).toBe('gap');
      expect(JSON.parse(gap!.data!)).toMatchObject({ last_event_id: lastEventId, message: expect.stringContaining('no longer held') });
      const next = emit(acme.orgId);
      expect((await stream.event())?.id).toBe(next.id);
      await stream.cancel();
    }
  });

  it('keeps the connection alive with comments', async () => {
    const stream = await open(acme);
    let e: SseEvent | undefined;
    do e = await stream.next();
    while (e?.comment === undefined);
    expect(e.comment).toBe('keep-alive');
    await stream.cancel();
  });

  it('ends the stream of a listener that does not keep up, with an error event, holding a bounded amount for it', async () => {
    const stream = await open(acme);
    await stream.event();
    // About 10 MB of events that the listener does not read: beyond what the sockets hold, and far beyond the 64 KiB bound.
    const sent = 4_000;
    for (let i = 0; i < sent; i++) emit(acme.orgId, 'video.completed', `${'A long prompt. '.repeat(160)}${i}`);
    let last: SseEvent | undefined;
    let count = 0;
    for (let e = await stream.event(); e; e = await stream.event()) {
      last = e;
      count++;
    }
    expect(last?.event).toBe('error');
    expect(JSON.parse(last!.data!)).toEqual({
      error: { type: 'api_error', code: 'listener_too_slow', message: expect.stringContaining('reconnect with Last-Event-ID') },
    });
    expect(count).toBeLessThan(sent);
  });

  it('ends the stream at once when its key is revoked, and when it expires', async () => {
    const temporary = await customer('Initech', { expires_in_days: 1 });
    const stream = await open(temporary);
    await stream.event();
    clock.advance(86_400_000);
    const expired = await stream.event();
    expect(expired?.event).toBe('error');
    expect(JSON.parse(expired!.data!).error).toMatchObject({ code: 'invalid_api_key', message: 'This API key has expired.' });
    expect(await stream.event()).toBeUndefined();

    // Revoked while the stream was being opened: refused like any request, not a stream that begins and ends.
    const early = await customer('Soylent');
    beforeReplay = async () => void (await services.request(Subjects.billing.revokeApiKey, { org_id: early.orgId, key_id: early.keyId }));
    try {
      const refused = await fetch(`${url}/v1/webhooks/events/stream`, { headers: { authorization: `Bearer ${early.key}` } });
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as any).error).toEqual({ type: 'authentication_error', code: 'invalid_api_key', message: 'This API key was revoked.' });
    } finally {
      beforeReplay = undefined;
    }

    const revocable = await customer('Umbrella');
    const second = await open(revocable);
    await second.event();
    unwrap(await services.request(Subjects.billing.revokeApiKey, { org_id: revocable.orgId, key_id: revocable.keyId }));
    const revoked = await second.event();
    expect(JSON.parse(revoked!.data!).error).toEqual({ type: 'authentication_error', code: 'invalid_api_key', message: 'This API key was revoked.' });
    expect(await second.event()).toBeUndefined();
  });

  it('answers 429 beyond the open streams an organization may hold, and 503 when the webhook service does not answer', async () => {
    const busy = await customer('Hooli');
    const streams = await Promise.all([open(busy), open(busy), open(busy)]);
    expect(streams.map((s) => s.res.status)).toEqual([200, 200, 200]);
    const refused = await fetch(`${url}/v1/webhooks/events/stream`, { headers: { authorization: `Bearer ${busy.key}` } });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as any).error.code).toBe('rate_limit_exceeded');
    const other = await open(globex);
    expect(other.res.status).toBe(200);
    await Promise.all([...streams, other].map((s) => s.cancel()));
    await vi.waitFor(async () => {
      const again = await fetch(`${url}/v1/webhooks/events/stream`, { headers: { authorization: `Bearer ${busy.key}` } });
      expect(again.status).toBe(200);
      await again.body!.cancel();
    });

    unregisterReplay();
    try {
      const down = await fetch(`${url}/v1/webhooks/events/stream`, { headers: { authorization: `Bearer ${globex.key}` } });
      expect(down.status).toBe(503);
      expect(((await down.json()) as any).error.code).toBe('service_unavailable');
    } finally {
      unregisterReplay = serveReplay();
    }
  });
});
