import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'key-budget-admin-token-0123456789';
const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Name one vegetable.' }], max_tokens: 8 };
const VIDEO = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };

interface Key {
  id: string;
  key: string;
  budget: { daily: number | null; monthly: number | null; total: number | null };
  spend: { today: number; this_month: number; total: number };
}

/** An API key's budget (USD per UTC day, month, all time), set when it is made and changed by PATCH, over HTTP. */
describe('API key budgets', () => {
  let dir: string;
  let app: Standalone;
  let orgId: string;

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    await expectConformance(app.url, method, new URL(path, app.url), res.status, res.headers, text);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }
  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);
  const v1 = (key: string, method: string, path: string, body?: unknown) => call(method, `/v1${path}`, { authorization: `Bearer ${key}` }, body);
  const newKey = async (extra: Record<string, unknown> = {}) =>
    (await admin('POST', `/organizations/${orgId}/keys`, { name: 'budgeted', scopes: ['chat:write', 'video:write', 'video:read'], ...extra })).body as Key;
  const listed = async (id: string) => ((await admin('GET', `/organizations/${orgId}/keys`)).body.data as Key[]).find((k) => k.id === id)!;
  const balance = async () => (await admin('GET', `/organizations/${orgId}/balance`)).body as { available: number; reserved: number };
  const patch = (id: string, body: unknown) => admin('PATCH', `/organizations/${orgId}/keys/${id}`, body);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-key-budget-'));
    app = await startStandalone({
      // Videos stay in progress: their holds count in the key's spend until they end.
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', SIM_VIDEO_DURATION_MS: '600000', CHAT_SIMULATOR_WORD_DELAY_MS: '1' }),
    });
    orgId = (await admin('POST', '/organizations', { name: 'acme', tier: 'standard' })).body.id;
    await admin('POST', `/organizations/${orgId}/credits`, { amount: 100 });
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses a key's request once its daily budget is spent, with 402 naming the budget and what is left; another key of the organization is unaffected; a raised budget lets the next request through", async () => {
    const limited = await newKey({ budget: { daily: 50 } });
    const other = await newKey();
    expect(limited.budget).toEqual({ daily: 50, monthly: null, total: null });
    expect(other.budget).toEqual({ daily: null, monthly: null, total: null });

    const start = await balance();
    expect((await v1(limited.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
    const chatCost = Math.round((start.available - (await balance()).available) * 1e6);
    expect(chatCost).toBeGreaterThan(0);
    expect((await listed(limited.id)).spend).toEqual({ today: chatCost / 1e6, this_month: chatCost / 1e6, total: chatCost / 1e6 });

    const beforeVideo = await balance();
    expect((await v1(limited.key, 'POST', '/videos', VIDEO)).status).toBe(200);
    const videoCost = Math.round((beforeVideo.available - (await balance()).available) * 1e6);
    expect(videoCost).toBeGreaterThan(0);

    // The day's budget is now exactly what the key has spent and holds.
    const spentBudget = (chatCost + videoCost) / 1e6;
    expect((await patch(limited.id, { budget: { daily: spentBudget } })).body.budget).toEqual({ daily: spentBudget, monthly: null, total: null });
    const held = await balance();
    const refused = await v1(limited.key, 'POST', '/videos', VIDEO);
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ type: 'insufficient_quota', code: 'key_budget_exceeded' });
    expect(refused.body.error.message).toContain(`daily budget of the API key '${limited.id}'`);
    expect(refused.body.error.message).toContain('$0.00 is left today (UTC)');
    expect((await v1(limited.key, 'POST', '/chat/completions', CHAT)).body.error.code).toBe('key_budget_exceeded');
    expect(await balance()).toEqual(held);

    expect((await v1(other.key, 'POST', '/videos', VIDEO)).status).toBe(200);
    expect((await v1(other.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);

    const raised = await patch(limited.id, { budget: { daily: (chatCost + 2 * videoCost) / 1e6, total: 1000 } });
    expect(raised.body.budget).toEqual({ daily: (chatCost + 2 * videoCost) / 1e6, monthly: null, total: 1000 });
    expect((await v1(limited.key, 'POST', '/videos', VIDEO)).status).toBe(200);
    expect((await v1(limited.key, 'POST', '/videos', VIDEO)).body.error.code).toBe('key_budget_exceeded');

    // null removes the limit.
    expect((await patch(limited.id, { budget: { daily: null } })).body.budget).toEqual({ daily: null, monthly: null, total: 1000 });
    expect((await v1(limited.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
  });

  it('refuses a bad budget with 400 naming the field', async () => {
    const key = await newKey();
    for (const [body, param] of [
      [{ budget: { daily: -1 } }, 'budget.daily'],
      [{ budget: { daily: 0.0000001 } }, 'budget.daily'],
      [{ budget: { weekly: 5 } }, 'budget.weekly'],
      [{ budget: { monthly: '5' } }, 'budget.monthly'],
    ] as const) {
      const refused = await patch(key.id, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error.param, JSON.stringify(body)).toBe(param);
    }
    expect((await admin('POST', `/organizations/${orgId}/keys`, { name: 'x', scopes: ['chat:write'], budget: { total: 0 } })).status).toBe(400);
  });
});
