import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'admin-organizations-admin-token-0123456789';

/** The operators' view of organizations (issue 30): the list with balances and search, and an organization's webhooks. */
describe('the admin API: organizations with balances, search, and one organization’s webhooks', () => {
  let dir: string;
  let app: Standalone;
  const orgs: Record<string, string> = {};

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
  const names = (list: { data: Array<{ name: string }> }) => list.data.map((o) => o.name);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-admin-orgs-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE: '1' }),
    });
    for (const name of ['Acme Studios', 'acme labs', 'Globex', 'ACME']) {
      orgs[name] = (await admin('POST', '/organizations', { name, tier: 'standard' })).body.id;
    }
    await admin('POST', `/organizations/${orgs['Acme Studios']}/credits`, { amount: 12.5 });
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists each organization with its available and reserved balance', async () => {
    const list = (await admin('GET', '/organizations')).body;
    expect(names(list)).toEqual(['ACME', 'Globex', 'acme labs', 'Acme Studios']);
    const balances = Object.fromEntries(list.data.map((o: { name: string; balance: unknown }) => [o.name, o.balance]));
    expect(balances['Acme Studios']).toEqual({ available: 12.5, reserved: 0 });
    expect(balances['Globex']).toEqual({ available: 0, reserved: 0 });
  });

  it('finds organizations by a name prefix in any case, by name, or one by its id, and pages through them', async () => {
    expect(names((await admin('GET', '/organizations?q=acme')).body)).toEqual(['ACME', 'acme labs', 'Acme Studios']);
    expect(names((await admin('GET', '/organizations?q=ACME%20s')).body)).toEqual(['Acme Studios']);
    expect(names((await admin('GET', '/organizations?q=studios')).body)).toEqual([]);
    const byId = (await admin('GET', `/organizations?q=${orgs['Globex']}`)).body;
    expect(byId.data).toEqual([expect.objectContaining({ id: orgs['Globex'], name: 'Globex', balance: { available: 0, reserved: 0 } })]);

    const first = (await admin('GET', '/organizations?q=acme&limit=2')).body;
    expect([names(first), first.has_more]).toEqual([['ACME', 'acme labs'], true]);
    const second = (await admin('GET', `/organizations?q=acme&limit=2&after=${first.data[1].id}`)).body;
    expect([names(second), second.has_more]).toEqual([['Acme Studios'], false]);
  });

  it('refuses a blank or overlong search with 400 naming q', async () => {
    for (const q of ['%20%20', 'x'.repeat(201)]) {
      const refused = await admin('GET', `/organizations?q=${q}`);
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: 'invalid_request_error', param: 'q' });
    }
  });

  it("answers one organization's webhooks with their delivery state and no secret, never another's", async () => {
    const keyOf = async (orgId: string) =>
      (await admin('POST', `/organizations/${orgId}/keys`, { name: 'hooks', scopes: ['webhook:write', 'webhook:read'] })).body.key as string;
    const acmeKey = await keyOf(orgs['Acme Studios']!);
    const globexKey = await keyOf(orgs['Globex']!);
    const created = (await v1(acmeKey, 'POST', '/webhooks', { url: 'http://127.0.0.1:9/acme', events: ['video.completed', 'video.failed'] })).body;
    await v1(globexKey, 'POST', '/webhooks', { url: 'http://127.0.0.1:9/globex', events: ['video.completed'] });

    const listed = await admin('GET', `/organizations/${orgs['Acme Studios']}/webhooks`);
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({
      object: 'list',
      data: [
        {
          id: created.id,
          object: 'webhook',
          url: 'http://127.0.0.1:9/acme',
          events: ['video.completed', 'video.failed'],
          description: created.description,
          is_active: true,
          created: created.created,
          last_success_at: null,
          last_failure_at: null,
          failure_count: 0,
        },
      ],
      has_more: false,
    });
    expect(JSON.stringify(listed.body)).not.toContain('whsec_');
    expect((await admin('GET', `/organizations/${orgs['ACME']}/webhooks`)).body.data).toEqual([]);
    const unknown = await admin('GET', '/organizations/org_nobody/webhooks');
    expect(unknown.status).toBe(404);
  });
});
