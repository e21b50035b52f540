import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { clientFor } from './client';
import { conformingSdkFetch } from './conformance';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

describe.each(modes)('foundation (%s)', (_mode, start) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    service = await start();
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
  });

  const expectRateLimitHeaders = (headers: Headers) => {
    expect(Number(headers.get('x-ratelimit-limit'))).toBeGreaterThan(0);
    expect(Number(headers.get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
    expect(Number(headers.get('x-ratelimit-reset'))).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
  };

  describe('authentication', () => {
    it('answers a request without a key with 401 invalid_api_key and rate-limit headers', async () => {
      const res = await api.call('GET', '/v1/health');
      expect(res.status).toBe(401);
      expect(res.body).toEqual({
        error: { type: 'authentication_error', code: 'invalid_api_key', message: expect.stringContaining('API key') },
      });
      expectRateLimitHeaders(res.headers);
    });

    it.each([
      ['a malformed header', 'Basic abc'],
      ['an unknown key', 'Bearer oc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
      ['a key of the wrong format', 'Bearer sk-123'],
    ])('answers %s with 401', async (_, authorization) => {
      const res = await fetch(`${service.url}/v1/health`, { headers: { authorization } });
      expect(res.status).toBe(401);
      expect(((await res.json()) as any).error.code).toBe('invalid_api_key');
    });

    it('serves health to any valid key, with the release version and an ISO timestamp', async () => {
      const { key } = await api.newCustomer({ scopes: ['chat:read'] });
      const res = await api.call('GET', '/v1/health', { token: key });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ok', version: expect.stringMatching(/^\d+\.\d+\.\d+/), timestamp: expect.any(String) });
      expect(new Date(res.body.timestamp).toISOString()).toBe(res.body.timestamp);
      expectRateLimitHeaders(res.headers);
    });

    it('stops accepting a key on the very next request after it is revoked', async () => {
      const { orgId, key, keyId } = await api.newCustomer();
      expect((await api.call('GET', '/v1/health', { token: key })).status).toBe(200);
      const revoked = await api.admin('DELETE', `/organizations/${orgId}/keys/${keyId}`);
      expect(revoked.status).toBe(200);
      expect(revoked.body.revoked_at).toEqual(expect.any(Number));
      const res = await api.call('GET', '/v1/health', { token: key });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_api_key');
    });

    it('creates test-mode keys that authenticate as such', async () => {
      const { key } = await api.newCustomer({ key: { mode: 'test' } });
      expect(key).toMatch(/^oc_test_[A-Za-z0-9_-]{43}$/);
      expect((await api.call('GET', '/v1/health', { token: key })).status).toBe(200);
    });
  });

  describe('models', () => {
    // Published 2026-01-01: a fixed date, never the time of the request.
    const model = (id: string) => ({ id, object: 'model', created: 1_767_225_600, owned_by: 'oc' });

    it("lists the spec's models in OpenAI's shape to any valid key", async () => {
      const { key } = await api.newCustomer({ scopes: ['webhook:read'] });
      const first = await api.call('GET', '/v1/models', { token: key });
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ object: 'list', data: [model('chat-2'), model('video-2'), model('video-2-pro')] });
      expectRateLimitHeaders(first.headers);
      expect((await api.call('GET', '/v1/models/video-2-pro', { token: key })).body).toEqual(first.body.data[2]);
      expect((await api.call('GET', '/v1/models')).status).toBe(401);
    });

    it('answers an unknown model with 404 model_not_found naming the model', async () => {
      const { key } = await api.newCustomer();
      const res = await api.call('GET', '/v1/models/gpt-4o', { token: key });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({
        error: { type: 'invalid_request_error', code: 'model_not_found', param: 'model', message: expect.stringContaining("'gpt-4o'") },
      });
    });

    it('serves the official openai SDK, unchanged', async () => {
      const { key } = await api.newCustomer();
      const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: key, maxRetries: 0 , fetch: conformingSdkFetch(service.url) });
      const ids: string[] = [];
      for await (const m of client.models.list()) ids.push(m.id);
      expect(ids).toEqual(['chat-2', 'video-2', 'video-2-pro']);
      expect(await client.models.retrieve('chat-2')).toEqual(model('chat-2'));
      await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
    });
  });

  describe('the prepaid balance', () => {
    it('shows the organization its available and reserved balance and its tier', async () => {
      const { key, orgId } = await api.newCustomer({ credit: 12.5, tier: 'premium' });
      const res = await api.call('GET', '/v1/account/balance', { token: key });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ object: 'balance', organization_id: orgId, available: 12.5, reserved: 0, currency: 'usd', tier: 'premium' });
    });

    it('records each credit in the ledger, newest first, with cursor pagination', async () => {
      const { orgId } = await api.newCustomer({ credit: 1 });
      await api.admin('POST', `/organizations/${orgId}/credits`, { amount: 2.000001, description: 'Second' });
      const first = await api.admin('GET', `/organizations/${orgId}/ledger?limit=1`);
      expect(first.body).toMatchObject({
        object: 'list',
        has_more: true,
        data: [{ object: 'ledger_entry', type: 'credit', amount: 2.000001, available_after: 3.000001, description: 'Second' }],
      });
      const second = await api.admin('GET', `/organizations/${orgId}/ledger?limit=1&after=${first.body.data[0].id}`);
      expect(second.body).toMatchObject({ has_more: false, data: [{ amount: 1, available_after: 1, description: 'Top-up' }] });
    });
  });

  describe('errors in the spec shape, never a 5xx for bad input', () => {
    it('answers an unknown path with 404 and a wrong method with 405 and Allow', async () => {
      const { key } = await api.newCustomer();
      const unknown = await api.call('GET', '/v1/nothing-here', { token: key });
      expect(unknown.status).toBe(404);
      expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unknown_url' });
      expectRateLimitHeaders(unknown.headers);
      const wrong = await api.call('DELETE', '/v1/health', { token: key });
      expect(wrong.status).toBe(405);
      expect(wrong.headers.get('allow')).toBe('GET');
      expect(wrong.body.error.code).toBe('method_not_allowed');
    });

    it('refuses malformed JSON, a wrong content type and an oversized body', async () => {
      const malformed = await api.call('POST', '/admin/v1/organizations', { token: service.adminToken, rawBody: '{"name":' });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });

      const wrongType = await api.call('POST', '/admin/v1/organizations', {
        token: service.adminToken,
        rawBody: 'name=Acme',
        contentType: 'application/x-www-form-urlencoded',
      });
      expect(wrongType.status).toBe(415);
      expect(wrongType.body.error.code).toBe('unsupported_content_type');

      const huge = await api.call('POST', '/admin/v1/organizations', {
        token: service.adminToken,
        rawBody: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 1) }),
      });
      expect(huge.status).toBe(413);
      expect(huge.body.error.code).toBe('request_too_large');
    });

    it('names the parameter at fault', async () => {
      const missing = await api.admin('POST', '/organizations', { tier: 'free' });
      expect(missing.status).toBe(400);
      expect(missing.body.error).toMatchObject({ code: 'missing_parameter', param: 'name' });
      const badTier = await api.admin('POST', '/organizations', { name: 'x', tier: 'gold' });
      expect(badTier.body.error).toMatchObject({ code: 'invalid_parameter', param: 'tier' });
      const { orgId } = await api.newCustomer();
      const badAmount = await api.admin('POST', `/organizations/${orgId}/credits`, { amount: 0.0000001 });
      expect(badAmount.body.error).toMatchObject({ code: 'invalid_parameter', param: 'amount' });
      const badScope = await api.admin('POST', `/organizations/${orgId}/keys`, { name: 'k', scopes: ['video:fly'] });
      expect(badScope.body.error).toMatchObject({ code: 'invalid_parameter', param: 'scopes[0]' });
      const badLimit = await api.admin('GET', '/organizations?limit=1000');
      expect(badLimit.body.error).toMatchObject({ code: 'invalid_parameter', param: 'limit' });
      const repeated = await api.admin('GET', '/organizations?limit=1&limit=2&after[$gt]=x');
      expect(repeated.status).toBe(400);
      expect(repeated.body.error.param).toBe('limit');
    });

    it('answers another organization, a missing one and a bad cursor with 404', async () => {
      const res = await api.admin('GET', '/organizations/org_missing');
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'resource_not_found' });
      const a = await api.newCustomer();
      const b = await api.newCustomer();
      const crossRevoke = await api.admin('DELETE', `/organizations/${b.orgId}/keys/${a.keyId}`);
      expect(crossRevoke.status).toBe(404);
      expect((await api.call('GET', '/v1/health', { token: a.key })).status).toBe(200);
    });

    it('refuses the admin API without the admin token, and to API keys', async () => {
      const { key } = await api.newCustomer();
      for (const token of [null, key, 'wrong-token']) {
        const res = await api.call('GET', '/admin/v1/organizations', { token });
        expect(res.status).toBe(401);
        expect(res.body.error.type).toBe('authentication_error');
      }
    });
  });

  describe('rate limits', () => {
    it("enforces the key's own per-minute limit with 429, Retry-After and the seconds to wait", async () => {
      const { key } = await api.newCustomer({ key: { rate_limit_per_minute: 3 } });
      const statuses: number[] = [];
      let last: { status: number; headers: Headers; body: any } | undefined;
      for (let i = 0; i < 4; i++) {
        last = await api.call('GET', '/v1/health', { token: key });
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(last!.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      const retryAfter = Number(last!.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(last!.body.error.message).toContain(`${retryAfter} seconds`);
      expect(last!.headers.get('x-ratelimit-limit')).toBe('3');
      expect(last!.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it("reports the tightest window: a free organization's 10 per minute under a key's 100", async () => {
      const { key } = await api.newCustomer({ tier: 'free' });
      const first = await api.call('GET', '/v1/health', { token: key });
      expect(first.headers.get('x-ratelimit-limit')).toBe('10');
      expect(first.headers.get('x-ratelimit-remaining')).toBe('9');
    });

    it('counts a tier limit across all keys of the organization', async () => {
      const { orgId, key } = await api.newCustomer({ tier: 'free' });
      const second = await api.admin('POST', `/organizations/${orgId}/keys`, { name: 'second', scopes: ['chat:read'] });
      for (let i = 0; i < 10; i++) expect((await api.call('GET', '/v1/health', { token: i % 2 ? key : second.body.key })).status).toBe(200);
      const refused = await api.call('GET', '/v1/health', { token: key });
      expect(refused.status).toBe(429);
    });

    it("applies a tier change to the organization's limits at once", async () => {
      const { orgId, key } = await api.newCustomer({ tier: 'free' });
      expect((await api.call('GET', '/v1/health', { token: key })).headers.get('x-ratelimit-limit')).toBe('10');
      expect((await api.admin('PATCH', `/organizations/${orgId}`, { tier: 'premium' })).body.tier).toBe('premium');
      expect((await api.call('GET', '/v1/health', { token: key })).headers.get('x-ratelimit-limit')).toBe('100');
    });
  });

  describe('enterprise custom limits', () => {
    const ENTERPRISE = { requests_per_minute: 2_000, requests_per_day: 1_000_000, chat_requests_per_minute: 1_000, chat_tokens_per_day: 100_000_000 };

    it("apply from the very next request, show in the headers and the organization, and null restores the tier's", async () => {
      // A key allowing more than the organization, so that the organization's window is the tightest.
      const { orgId, key } = await api.newCustomer({ tier: 'enterprise', key: { rate_limit_per_minute: 100_000 } });
      expect((await api.call('GET', '/v1/health', { token: key })).headers.get('x-ratelimit-limit')).toBe('2000');
      expect((await api.admin('GET', `/organizations/${orgId}`)).body.limits).toEqual(ENTERPRISE);

      const set = await api.admin('PATCH', `/organizations/${orgId}`, { limits: { requests_per_minute: 3 } });
      expect(set.status).toBe(200);
      expect(set.body).toMatchObject({ id: orgId, tier: 'enterprise', limits: { ...ENTERPRISE, requests_per_minute: 3 } });
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await api.call('GET', '/v1/health', { token: key }));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
      expect(answers.map((a) => a.headers.get('x-ratelimit-limit'))).toEqual(['3', '3', '3', '3']);
      expect(answers[3]!.body.error.code).toBe('rate_limit_exceeded');

      const restored = await api.admin('PATCH', `/organizations/${orgId}`, { limits: { requests_per_minute: null } });
      expect(restored.body.limits).toEqual(ENTERPRISE);
      const after = await api.call('GET', '/v1/health', { token: key });
      expect(after.status).toBe(200);
      expect(after.headers.get('x-ratelimit-limit')).toBe('2000');
    });

    it('apply to the chat windows too', async () => {
      const { orgId, key } = await api.newCustomer({ tier: 'enterprise', key: { rate_limit_per_minute: 100_000 } });
      await api.admin('PATCH', `/organizations/${orgId}`, { limits: { chat_requests_per_minute: 2 } });
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await api.call('GET', '/v1/chat/completions', { token: key })).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect((await api.call('GET', '/v1/health', { token: key })).status).toBe(200);
    });

    it('take positive whole numbers only, naming the figure at fault', async () => {
      const { orgId } = await api.newCustomer({ tier: 'enterprise' });
      for (const [limits, param] of [
        [{ requests_per_minute: 0 }, 'limits.requests_per_minute'],
        [{ chat_tokens_per_day: 1.5 }, 'limits.chat_tokens_per_day'],
        [{ requests_per_day: '10' }, 'limits.requests_per_day'],
        [{ chat_requests_per_minute: -1 }, 'limits.chat_requests_per_minute'],
        [{ request_per_minute: 5 }, 'limits.request_per_minute'],
      ] as const) {
        const res = await api.admin('PATCH', `/organizations/${orgId}`, { limits });
        expect(res.status).toBe(400);
        expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param });
      }
      expect((await api.admin('GET', `/organizations/${orgId}`)).body.limits).toEqual(ENTERPRISE);
    });

    it('are for enterprise only, and leaving enterprise clears them', async () => {
      const { orgId: standard } = await api.newCustomer({ tier: 'standard' });
      const refused = await api.admin('PATCH', `/organizations/${standard}`, { limits: { requests_per_minute: 3 } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: 'custom_limits_require_enterprise', param: 'limits' });
      const upgraded = await api.admin('PATCH', `/organizations/${standard}`, { tier: 'enterprise', limits: { requests_per_minute: 3 } });
      expect(upgraded.body).toMatchObject({ tier: 'enterprise', limits: { ...ENTERPRISE, requests_per_minute: 3 } });

      const premium = await api.admin('PATCH', `/organizations/${standard}`, { tier: 'premium' });
      expect(premium.body.limits).toEqual({ requests_per_minute: 500, requests_per_day: 50_000, chat_requests_per_minute: 300, chat_tokens_per_day: 10_000_000 });
      expect((await api.admin('PATCH', `/organizations/${standard}`, { tier: 'enterprise' })).body.limits).toEqual(ENTERPRISE);
    });
  });

  describe('keys', () => {
    it('lists keys without secrets, with prefix, scopes and usage', async () => {
      const { orgId, key, keyId } = await api.newCustomer({ scopes: ['video:read', 'video:write'] });
      await api.call('GET', '/v1/health', { token: key });
      const list = await api.admin('GET', `/organizations/${orgId}/keys`);
      expect(list.status).toBe(200);
      expect(JSON.stringify(list.body)).not.toContain(key);
      expect(list.body.data).toEqual([
        expect.objectContaining({
          id: keyId,
          object: 'api_key',
          prefix: key.slice(0, 12),
          scopes: ['video:read', 'video:write'],
          rate_limit_per_minute: 100,
          revoked_at: null,
        }),
      ]);
      await vi.waitFor(
        async () => {
          const again = await api.admin('GET', `/organizations/${orgId}/keys`);
          expect(again.body.data[0].usage.requests).toBeGreaterThanOrEqual(1);
          expect(again.body.data[0].last_used_at).toEqual(expect.any(Number));
        },
        { timeout: 10_000, interval: 100 },
      );
    });
  });

  it('keeps organizations, balances and keys across a restart', async () => {
    const { key, orgId } = await api.newCustomer({ credit: 7.25 });
    await service.restart();
    const res = await api.call('GET', '/v1/account/balance', { token: key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ organization_id: orgId, available: 7.25 });
  });
});
