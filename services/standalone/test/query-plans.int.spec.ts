import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStores } from '@oc/eventstore';
import { servedByIndex } from '@oc/readmodel';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { clientFor } from './client';
import { ADMIN_TOKEN } from './harness';

/**
 * Every read-model query the services make, made for real through the API (and at a restart), then
 * checked: each one's plan must read an index range, or walk an index in order for one page, and never
 * scan a collection or sort outside an index, since every collection grows with use.
 */
describe('read-model queries', () => {
  let dataDir: string;
  let receiver: Server;
  let received: string[];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-plans-'));
    received = [];
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk)).on('end', () => {
        received.push(body);
        res.writeHead(received.length === 1 ? 500 : 204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const start = () =>
    startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        SIM_VIDEO_DURATION_MS: '1',
        SIM_VIDEO_POLL_MS: '10',
        CHAT_SIMULATOR_WORD_DELAY_MS: '0',
        WEBHOOK_ALLOW_PRIVATE: '1',
        WEBHOOK_RETRY_DELAYS_MS: '0,60000',
      }),
    });

  const plansOf = (app: Standalone) => Object.values(app.readModels).flatMap((store) => store.plans);

  it('reads every collection through an index, for every query the services make', async () => {
    let app = await start();
    const plans = [];
    try {
      const { call, admin, newCustomer } = clientFor({ url: app.url, adminToken: ADMIN_TOKEN } as never);
      const scopes = ['video:read', 'video:write', 'video:delete', 'chat:read', 'chat:write', 'text:write', 'webhook:read', 'webhook:write'];
      const a = await newCustomer({ tier: 'enterprise', credit: 100, scopes });
      const b = await newCustomer({ tier: 'premium', credit: 5, scopes });
      const as = (token: string) => (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
        headers
          ? fetch(`${app.url}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(
              async (r) => ({ status: r.status, body: await r.json() }),
            )
          : call(method, path, { token, ...(body !== undefined ? { body } : {}) });
      const ok = async (response: Promise<{ status: number; body: any }>) => {
        const { status, body } = await response;
        expect(status, JSON.stringify(body)).toBe(200);
        return body;
      };
      const alice = as(a.key);

      // Billing: organizations, balances, ledger and keys, each list paged through its cursor.
      const orgs = await ok(admin('GET', '/organizations?limit=1'));
      await ok(admin('GET', `/organizations?limit=1&after=${orgs.data[0].id}`));
      await ok(admin('GET', `/organizations/${a.orgId}`));
      await ok(admin('PATCH', `/organizations/${b.orgId}`, { tier: 'standard' }));
      await ok(admin('POST', `/organizations/${a.orgId}/credits`, { amount: 1 }));
      const ledger = await ok(admin('GET', `/organizations/${a.orgId}/ledger?limit=1`));
      await ok(admin('GET', `/organizations/${a.orgId}/ledger?limit=1&after=${ledger.data[0].id}`));
      const extra = await ok(admin('POST', `/organizations/${a.orgId}/keys`, { name: 'extra', scopes: ['chat:read'] }));
      await ok(admin('GET', `/organizations/${a.orgId}/keys`));
      await ok(admin('DELETE', `/organizations/${a.orgId}/keys/${extra.id}`));
      await ok(alice('GET', '/v1/account/balance'));

      // Chat: sessions created, continued, listed with a cursor and read back; a text completion.
      const first = await ok(alice('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Hello there' }] }));
      await ok(alice('POST', '/v1/chat/completions', { model: 'chat-2', session_id: first.session_id, messages: [{ role: 'user', content: 'And then?' }] }));
      await ok(alice('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Another one' }] }));
      const sessions = await ok(alice('GET', '/v1/chat/completions?limit=1'));
      await ok(alice('GET', `/v1/chat/completions?limit=1&after=${sessions.data[0].id}`));
      await ok(alice('GET', `/v1/chat/completions/${first.session_id}`));
      await ok(alice('POST', '/v1/completions', { model: 'chat-2', prompt: 'Once upon a time', max_tokens: 5 }));

      // Webhooks: registered, listed, read, changed, tested; deliveries listed, retried and recovered.
      const hook = await ok(
        alice('POST', '/v1/webhooks', { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['video.completed'] }),
      );
      await ok(alice('GET', '/v1/webhooks'));
      await ok(alice('GET', `/v1/webhooks/${hook.id}`));
      await ok(alice('PATCH', `/v1/webhooks/${hook.id}`, { events: ['video.completed', 'video.failed'] }));

      // Videos: created (twice under one idempotency key), listed with a cursor, read, remixed, deleted.
      const video = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };
      const created = await ok(alice('POST', '/v1/videos', video, { 'idempotency-key': 'plans-1' }));
      await ok(alice('POST', '/v1/videos', video, { 'idempotency-key': 'plans-1' }));
      await ok(alice('POST', '/v1/videos', { ...video, prompt: 'A lighthouse in a storm at night' }));
      await vi.waitFor(async () => expect((await ok(alice('GET', `/v1/videos/${created.id}`))).status).toBe('completed'), { timeout: 20_000 });
      const videos = await ok(alice('GET', '/v1/videos?limit=1'));
      await ok(alice('GET', `/v1/videos?limit=1&after=${videos.data[0].id}`));
      await ok(alice('POST', `/v1/videos/${created.id}/remix`, { prompt: 'The same boat, at sunset' }));
      expect((await call('GET', `/v1/videos/${created.id}/content`, { token: a.key })).status).toBe(200);
      await ok(alice('DELETE', `/v1/videos/${videos.data[0].id}`));

      // The first delivery fails (the receiver answers 500 once), so there is a failed one to retry and recover.
      await vi.waitFor(() => expect(received.length).toBeGreaterThan(0), { timeout: 20_000 });
      await ok(alice('POST', `/v1/webhooks/${hook.id}/test`, {}));
      const deliveries = await ok(alice('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1`));
      await ok(alice('GET', `/v1/webhooks/${hook.id}/deliveries?limit=1&after=${deliveries.data[0].id}`));
      await vi.waitFor(async () => {
        const log = await ok(alice('GET', `/v1/webhooks/${hook.id}/deliveries?limit=10`));
        expect(log.data.some((d: { delivery_status: string; success: boolean }) => d.delivery_status === 'failed' || d.success === false)).toBe(true);
      });
      await ok(alice('POST', `/v1/webhooks/${hook.id}/recover`, { since: Math.floor(Date.now() / 1000) - 3_600 }));
      plans.push(...plansOf(app));

      // Unfinished jobs and pending deliveries are found again at a restart, and so is a reservation that an
      // earlier process of this chat replica held when it died (its sweep releases it).
      await app.close();
      const stores = openSqliteStores(join(dataDir, 'events.sqlite'));
      const reservation = { org_id: a.orgId, reservation_id: 'chatcmpl_crashed', amount_micros: 1_000, description: 'Chat completion' };
      await stores.store.appendToStream(`account-${a.orgId}`, [{ type: 'FundsReserved', data: { ...reservation, holder: `chat/${hostname()}/run_earlier` } }], {
        expectedRevision: 'any',
      });
      await stores.close();
      app = await start();
      const restarted = clientFor({ url: app.url, adminToken: ADMIN_TOKEN } as never);
      await vi.waitFor(async () => expect((await ok(restarted.call('GET', '/v1/account/balance', { token: a.key }))).reserved).toBe(0));
      plans.push(...plansOf(app));
    } finally {
      await app.close();
    }

    const unindexed = plans.filter(({ sql, plan }) => !servedByIndex(plan, / LIMIT \d+$/.test(sql)));
    expect(unindexed).toEqual([]);
    const queried = new Set(plans.map(({ sql }) => /FROM (rm_\w+)/.exec(sql)?.[1]));
    expect([...queried].sort()).toEqual([
      'rm_billing_alert_settings',
      'rm_billing_api_keys',
      'rm_billing_ledger_entries',
      'rm_billing_open_reservations',
      'rm_billing_organizations',
      'rm_chat_sessions',
      'rm_video_videos',
      'rm_webhook_deliveries',
      'rm_webhook_delivery_attempts',
      'rm_webhook_webhooks',
    ]);
  });
});
