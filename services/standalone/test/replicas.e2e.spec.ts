import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { openEventStream } from './event-stream';
import { type ReplicatedService, replicated } from './harness';
import { micros, moneyBooks } from './money';
import { natsReachable } from './nats';

/**
 * Two replicas of everything (issue 9), started as the README says (`REPLICAS=2 pnpm start:distributed`): two
 * gateways sharing rate limits through Redis, and two processes each of billing, chat, video and webhook on one
 * event store, every request spread over both gateways and landing on either replica. What a client sees must be what one process gives: its writes visible at once wherever
 * it reads, one video per Idempotency-Key, limits that hold exactly, books that add up, every webhook
 * delivered; and the same with one replica of each service killed (SIGKILL) in the middle of the load.
 */

const nats = await natsReachable();
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redisUp = await (async () => {
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  try {
    await probe.connect();
    return true;
  } catch (error) {
    if (process.env.REQUIRE_REDIS === '1') throw new Error(`REQUIRE_REDIS=1 but Redis is unreachable: ${String(error)}`);
    return false;
  } finally {
    probe.disconnect();
  }
})();

// More than one gateway needs Redis to count limits together: start:distributed refuses REPLICAS=2 without it.
describe.skipIf(!nats || !redisUp)('two gateways and two replicas of every service', () => {
  let service: ReplicatedService;
  let receiver: Receiver;
  /** A client of each gateway. */
  let gateways: ReturnType<typeof clientFor>[];
  let books: ReturnType<typeof moneyBooks>;

  beforeAll(async () => {
    receiver = await httpReceiver();
    service = await replicated(
      {
        SIM_VIDEO_DURATION_MS: '1500',
        CHAT_SIMULATOR_WORD_DELAY_MS: '2',
        WEBHOOK_MODE: 'development',
        WEBHOOK_ALLOW_PRIVATE: '1',
        WEBHOOK_RETRY_DELAYS_MS: '0,200,500,1000',
      },
      { replicas: 2, redisUrl },
    );
    gateways = service.urls.map((url) => clientFor({ ...service, url }));
    books = moneyBooks(service, gateways[0]!, receiver);
  });
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
  });

  const [A, B] = [0, 1];

  it("shows a client its writes at once through the other gateway, whichever replica answers", async () => {
    expect(service.output()).toContain(`OC API listening on ${service.urls[A]} and ${service.urls[B]} (distributed: 2 of each of`);
    // One event store for all, and one read-model file per service, projected by one replica and read by both.
    for (const file of ['events.sqlite', 'billing/read-models.sqlite', 'video/read-models.sqlite']) {
      expect((await stat(join(service.dataDir!, file))).isFile()).toBe(true);
    }
    for (const owner of ['billing', 'chat', 'video', 'webhook']) {
      const files = await readdir(join(service.dataDir!, owner));
      expect(files.filter((file) => /^read-models.*\.sqlite$/.test(file))).toEqual(['read-models.sqlite']);
    }
    const [a, b] = gateways as [ReturnType<typeof clientFor>, ReturnType<typeof clientFor>];
    for (let round = 0; round < 4; round++) {
      // The operator works through one gateway, the customer through the other, at once.
      const org = await a.admin('POST', '/organizations', { name: `Acme ${round}`, tier: 'standard' });
      expect(org.status).toBe(200);
      expect((await b.admin('POST', `/organizations/${org.body.id}/credits`, { amount: 2 })).body).toMatchObject({ available: 2 });
      const scopes = ['video:read', 'video:write', 'chat:read', 'chat:write', 'webhook:read', 'webhook:write'];
      const key = (await a.admin('POST', `/organizations/${org.body.id}/keys`, { name: 'k', scopes })).body.key as string;
      // A key made through one gateway authenticates through the other on its very first request.
      expect((await b.call('GET', '/v1/account/balance', { token: key })).body).toMatchObject({ available: 2, reserved: 0 });

      const video = await a.call('POST', '/v1/videos', {
        token: key,
        body: { model: 'video-2', prompt: 'A paper boat on a rainy street', seconds: '4', size: '1280x720' },
      });
      expect(video.status).toBe(200);
      expect((await b.call('GET', `/v1/videos/${video.body.id}`, { token: key })).status).toBe(200);
      expect((await b.call('GET', '/v1/videos', { token: key })).body.data.map((v: { id: string }) => v.id)).toEqual([video.body.id]);
      // The price is held, whichever billing replica the balance is read from.
      expect((await a.call('GET', '/v1/account/balance', { token: key })).body).toMatchObject({ available: 1.6, reserved: 0.4 });

      const chat = await b.call('POST', '/v1/chat/completions', {
        token: key,
        body: { model: 'chat-2', max_tokens: 8, messages: [{ role: 'user', content: 'Hello there' }] },
      });
      expect(chat.status).toBe(200);
      const session = await a.call('GET', `/v1/chat/completions/${chat.body.session_id}`, { token: key });
      expect(session.status).toBe(200);
      expect(session.body.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);

      const hook = await a.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      expect(hook.status).toBe(200);
      expect((await b.call('GET', `/v1/webhooks/${hook.body.id}`, { token: key })).status).toBe(200);
      await vi.waitFor(
        async () => expect((await b.call('GET', `/v1/videos/${video.body.id}`, { token: key })).body.status).toBe('completed'),
        { timeout: 30_000, interval: 200 },
      );
    }
  });

  it('creates one video and holds its price once for ten requests racing on one Idempotency-Key through both gateways', async () => {
    const c = await gateways[A]!.newCustomer({ tier: 'enterprise', credit: 5, scopes: ['video:read', 'video:write'], key: { rate_limit_per_minute: 10_000 } });
    const body = { model: 'video-2', prompt: 'One lighthouse, asked for ten times', seconds: '4', size: '1280x720' };
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        fetch(`${service.urls[i % 2]}/v1/videos`, {
          method: 'POST',
          headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json', 'idempotency-key': 'order-1' },
          body: JSON.stringify(body),
        }).then(async (res) => ({ status: res.status, body: (await res.json()) as { id: string } })),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    const ledger = (await gateways[B]!.admin('GET', `/organizations/${c.orgId}/ledger?limit=100`)).body.data as Array<{ type: string; reference: string }>;
    expect(ledger.filter((e) => e.type === 'reservation').map((e) => e.reference)).toEqual([answers[0]!.body.id]);
    expect((await gateways[B]!.call('GET', '/v1/videos', { token: c.key })).body.data).toHaveLength(1);

    const other = await gateways[B]!.call('POST', '/v1/videos', { token: c.key, body: { ...body, prompt: 'Something else entirely' } });
    expect(other.status).toBe(200);
    const reused = await fetch(`${service.urls[B]}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json', 'idempotency-key': 'order-1' },
      body: JSON.stringify({ ...body, seconds: '8' }),
    });
    expect(reused.status).toBe(409);
    expect(((await reused.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused');
  });

  it("holds an organization's webhook limit exactly when thirty creates race through both gateways", async () => {
    const c = await gateways[A]!.newCustomer({ tier: 'enterprise', scopes: ['webhook:read', 'webhook:write'], key: { rate_limit_per_minute: 10_000 } });
    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        gateways[i % 2]!.call('POST', '/v1/webhooks', { token: c.key, body: { url: receiver.url, events: ['video.failed'] } }).then((r) =>
          r.status === 200 ? 200 : `${r.status} ${r.body.error.code}`,
        ),
      ),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === '400 webhook_limit_reached')).toHaveLength(10);
    expect((await gateways[B]!.call('GET', '/v1/webhooks', { token: c.key })).body.data).toHaveLength(20);
  });

  it('streams each webhook event once through either gateway, and replays what a listener missed from either webhook replica', async () => {
    const c = await gateways[A]!.newCustomer({ tier: 'enterprise', credit: 5, scopes: ['video:read', 'video:write', 'webhook:read'], key: { rate_limit_per_minute: 10_000 } });
    const create = (gateway: number, n: number) =>
      gateways[gateway]!.call('POST', '/v1/videos', { token: c.key, body: { model: 'video-2', prompt: `A lighthouse, take ${n}`, seconds: '4', size: '1280x720' } });
    /** Reads a stream's events until every video of `ids` has its video.completed; each event id once. */
    const completedOf = async (stream: Awaited<ReturnType<typeof openEventStream>>, ids: string[]) => {
      const events: { id: string; type: string; video: string }[] = [];
      while (!ids.every((id) => events.some((e) => e.type === 'video.completed' && e.video === id))) {
        const e = await stream.next();
        if (!e) throw new Error(`stream ended or went quiet with ${JSON.stringify(events)}`);
        if (e.event === 'ready' || !e.id) continue;
        events.push({ id: e.id, type: e.event!, video: (JSON.parse(e.data!) as { data: { id: string } }).data.id });
      }
      expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
      return events;
    };
    const live = await openEventStream(service.urls[B]!, c.key);
    const first = await Promise.all([0, 1, 2, 3].map((n) => create(n % 2, n)));
    const seen = await completedOf(live, first.map((v) => v.body.id));
    live.close();
    // Missed while away: two more videos, then the listener comes back through the other gateway.
    const missed = await Promise.all([4, 5].map((n) => create(n % 2, n)));
    const resumed = await openEventStream(service.urls[A]!, c.key, { lastEventId: seen.at(-1)!.id });
    const replayed = await completedOf(resumed, missed.map((v) => v.body.id));
    resumed.close();
    expect(replayed.filter((e) => seen.some((s) => s.id === e.id))).toEqual([]);
  });

  it('lets exactly 100 of 300 requests through a key limited to 100 a minute, spread over both gateways', async () => {
    const c = await gateways[A]!.newCustomer({ tier: 'enterprise', scopes: ['video:read'], key: { rate_limit_per_minute: 100 } });
    const statuses: number[] = [];
    for (let wave = 0; wave < 3; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          fetch(`${service.urls[i % 2]}/v1/health`, { headers: { authorization: `Bearer ${c.key}` } }).then(async (res) => {
            await res.arrayBuffer();
            return res.status;
          }),
        ),
      );
      statuses.push(...answers);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 429)).toHaveLength(200);
  });

  it('keeps the books exact over 400 mixed requests spread over both gateways, each video asked for twice under one key', async () => {
    const c = await books.customer();
    const watch = books.watchBalance(c.orgId);
    const load = await books.mixedLoad(c.key, 400, 100, undefined, { twiceWithKey: true });
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    expect(load.duplicates).toEqual([]);
    expect(load.statuses[402]).toBeGreaterThan(0);
    expect(load.videos.size).toBeGreaterThan(0);
    expect(load.chats.size).toBeGreaterThan(0);
    const { ledger } = await books.expectBooksBalance(c, load);
    console.info(`two replicas, 400 requests: ${JSON.stringify(load.statuses)}; ${ledger.length} ledger entries; ${load.videos.size} videos`);
    // One reservation per video: the key's second request never reserved again.
    for (const id of load.videos) expect(ledger.filter((e) => e.type === 'reservation' && e.reference === id)).toHaveLength(1);
    expect(micros(ledger.find((e) => e.type === 'credit')!.amount)).toBe(3_000_000);
  });

  it('keeps the books exact, and delivers every webhook, when one replica of each service is killed (SIGKILL) mid-load', async () => {
    const c = await books.customer();
    const watch = books.watchBalance(c.orgId);
    const killed = ['billing-1', 'chat-1', 'video-1', 'webhook-1'];
    const kill = async () => {
      for (const name of killed) await service.kill(name);
    };
    const load = await books.mixedLoad(c.key, 400, 100, kill, { twiceWithKey: true });
    const seen = await watch.stop();
    expect(Math.min(...seen.map((s) => s.available))).toBeGreaterThanOrEqual(0);
    expect(load.duplicates).toEqual([]);
    // pnpm start:distributed says which process stopped, and carries on with the other of its service.
    for (const name of killed) {
      expect(service.output()).toContain(`[start:distributed] ${name} stopped (SIGKILL); 1 ${name.replace(/-1$/, '')} replica still running`);
    }
    const { ledger } = await books.expectBooksBalance(c, load);
    console.info(`two replicas, 4 SIGKILLs, 400 requests: ${JSON.stringify(load.statuses)}; ${ledger.length} ledger entries; ${load.videos.size} videos`);
    for (const id of load.videos) expect(ledger.filter((e) => e.type === 'reservation' && e.reference === id)).toHaveLength(1);
    // The replicas left serve everything: a new video after the kill completes and is delivered.
    const after = await gateways[B]!.call('POST', '/v1/videos', {
      token: c.key,
      body: { model: 'video-2', prompt: 'After the storm, a calm sea', seconds: '4', size: '1280x720' },
    });
    if (after.status === 200) {
      await vi.waitFor(
        () => expect(receiver.received.some((r) => r.rawBody.includes(after.body.id) && r.rawBody.includes('video.completed'))).toBe(true),
        { timeout: 30_000, interval: 200 },
      );
    } else {
      expect(after.status).toBe(402);
    }
  });
});
