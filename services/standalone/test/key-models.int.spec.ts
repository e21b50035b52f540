import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'key-models-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Name one vegetable.' }], max_tokens: 8 };
const VIDEO = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };

/** An API key limited to some models (`allowed_models`), set when it is made and changed by PATCH, over HTTP. */
describe('API keys limited to models', () => {
  let dir: string;
  let app: Standalone;
  let orgId: string;
  let otherOrgId: string;

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
  const newKey = async (org: string, extra: Record<string, unknown> = {}) =>
    (await admin('POST', `/organizations/${org}/keys`, { name: 'limited', scopes: ['chat:write', 'text:write', 'video:write', 'video:read'], ...extra })).body as {
      id: string;
      key: string;
      allowed_models: string[] | null;
    };
  const balance = async () => (await admin('GET', `/organizations/${orgId}/balance`)).body as { available: number; reserved: number };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-key-models-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', SIM_VIDEO_DURATION_MS: '60000', CHAT_SIMULATOR_WORD_DELAY_MS: '1' }),
    });
    orgId = (await admin('POST', '/organizations', { name: 'acme', tier: 'standard' })).body.id;
    otherOrgId = (await admin('POST', '/organizations', { name: 'globex', tier: 'standard' })).body.id;
    await admin('POST', `/organizations/${orgId}/credits`, { amount: 20 });
    await admin('POST', `/organizations/${otherOrgId}/members`, { email: 'bob@globex.test', password: PASSWORD });
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a model the key may not use with 403 model_not_allowed naming the parameter, holding nothing', async () => {
    const key = await newKey(orgId, { allowed_models: ['chat-2', 'chat-2'] });
    expect(key.allowed_models).toEqual(['chat-2']);
    expect((await v1(key.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
    const before = await balance();

    const refused = await v1(key.key, 'POST', '/videos', VIDEO);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: 'permission_error', code: 'model_not_allowed', param: 'model' });
    expect(refused.body.error.message).toMatch(/'video-2'.*chat-2/);
    expect(await balance()).toEqual(before);
    expect((await v1(key.key, 'POST', '/completions', { model: 'video-2', prompt: 'x' })).body.error.code).toBe('model_not_allowed');
  });

  it('applies a change from the next request, and null gives every model back', async () => {
    const key = await newKey(orgId, { allowed_models: ['chat-2'] });
    expect((await v1(key.key, 'POST', '/videos', VIDEO)).status).toBe(403);

    const changed = await admin('PATCH', `/organizations/${orgId}/keys/${key.id}`, { allowed_models: ['video-2'], name: 'video only' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ id: key.id, name: 'video only', allowed_models: ['video-2'] });
    expect((await v1(key.key, 'POST', '/videos', VIDEO)).status).toBe(200);
    expect((await v1(key.key, 'POST', '/chat/completions', CHAT)).body.error.code).toBe('model_not_allowed');

    expect((await admin('PATCH', `/organizations/${orgId}/keys/${key.id}`, { allowed_models: null })).body.allowed_models).toBeNull();
    expect((await v1(key.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
    const listed = (await admin('GET', `/organizations/${orgId}/keys`)).body.data.find((k: { id: string }) => k.id === key.id);
    expect(listed).toMatchObject({ name: 'video only', allowed_models: null });
  });

  it('refuses a bad change with 400 naming the field, another organization\'s key with 404, a revoked key with 400', async () => {
    const key = await newKey(orgId);
    expect(key.allowed_models).toBeNull();
    for (const [body, param] of [
      [{ allowed_models: [] }, 'allowed_models'],
      [{ allowed_models: ['Not A Model'] }, 'allowed_models[0]'],
      [{}, undefined],
      [{ scopes: ['chat:write'] }, undefined],
    ] as const) {
      const refused = await admin('PATCH', `/organizations/${orgId}/keys/${key.id}`, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      if (param) expect(refused.body.error.param).toBe(param);
    }
    expect((await admin('PATCH', `/organizations/${otherOrgId}/keys/${key.id}`, { name: 'mine' })).status).toBe(404);

    // Another organization's member, through the console.
    const signIn = await fetch(`${app.url}/console/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bob@globex.test', password: PASSWORD }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const { csrf_token } = (await signIn.json()) as { csrf_token: string };
    expect((await call('PATCH', `/console/v1/keys/${key.id}`, { cookie, 'x-csrf-token': csrf_token }, { name: 'mine' })).status).toBe(404);

    await admin('DELETE', `/organizations/${orgId}/keys/${key.id}`);
    const revoked = await admin('PATCH', `/organizations/${orgId}/keys/${key.id}`, { name: 'again' });
    expect(revoked.status).toBe(400);
    expect(revoked.body.error.code).toBe('api_key_revoked');
  });
});
