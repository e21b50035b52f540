import { scryptSync } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';
import { filesUnder } from './files';

const ADMIN_TOKEN = 'console-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';

/**
 * A browser's view of the console API: one cookie jar, the CSRF token it was given, and the Origin it sends.
 * Every answer is checked against the OpenAPI document, as the test client checks `/v1`'s.
 */
function browser(base: string) {
  let cookie = '';
  let csrf = '';
  async function call(method: string, path: string, body?: unknown, extra: Record<string, string> = {}) {
    const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...extra };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (method !== 'GET' && csrf && !('x-csrf-token' in extra)) headers['x-csrf-token'] = csrf;
    const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}), redirect: 'manual' });
    const set = res.headers.get('set-cookie');
    if (set) cookie = set.split(';')[0]!.endsWith('=') ? '' : set.split(';')[0]!;
    const text = await res.text();
    await expectConformance(base, method, new URL(path, base), res.status, res.headers, text);
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    if (json?.object === 'console_session' && json.csrf_token) csrf = json.csrf_token;
    return { status: res.status, headers: res.headers, body: json };
  }
  return { call, cookie: () => cookie, setCookie: (c: string) => (cookie = c) };
}

/** An operator's sign-in sent with these headers (a browser's Host, a proxy's X-Forwarded-Proto): its Set-Cookie. */
function signInCookie(base: string, headers: Record<string, string>): Promise<string> {
  const body = JSON.stringify({ admin_token: ADMIN_TOKEN });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/console/v1/sessions`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(String(res.headers['set-cookie'])) : reject(new Error(`sign-in: ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('the console API (/console/v1) on a running service', () => {
  let dir: string;
  let app: Standalone;
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    await expectConformance(app.url, method, new URL(`/admin/v1${path}`, app.url), res.status, res.headers, text);
    return { status: res.status, body: JSON.parse(text) as any };
  };
  let acme: string;
  let globex: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-console-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', KEY_USAGE_FLUSH_MS: '100', WEBHOOK_ALLOW_PRIVATE: '1' }),
    });
    acme = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).body.id;
    globex = (await admin('POST', '/organizations', { name: 'Globex', tier: 'free' })).body.id;
    await admin('POST', `/organizations/${acme}/credits`, { amount: 5 });
  });
  afterAll(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('adds members through the admin API, never showing a password or its hash', async () => {
    const created = await admin('POST', `/organizations/${acme}/members`, { email: 'Ada@Acme.test', name: 'Ada', password: PASSWORD });
    expect(created).toEqual({
      status: 200,
      body: { id: expect.stringMatching(/^mem_/), object: 'member', organization_id: acme, email: 'ada@acme.test', name: 'Ada', created: expect.any(Number) },
    });
    expect((await admin('POST', `/organizations/${globex}/members`, { email: 'ada@acme.test', password: PASSWORD })).body.error.code).toBe('member_exists');
    expect((await admin('POST', `/organizations/${globex}/members`, { email: 'bob@globex.test', password: 'short' })).body.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'password',
    });
    expect((await admin('POST', `/organizations/${globex}/members`, { email: 'bob@globex.test', password: PASSWORD })).status).toBe(200);
    const list = await admin('GET', `/organizations/${acme}/members`);
    expect(list.body.data.map((m: { email: string }) => m.email)).toEqual(['ada@acme.test']);
    expect(JSON.stringify(list.body)).not.toMatch(/scrypt|password/);
  });

  it('keeps a member\u2019s password only as a scrypt hash at one of OWASP\u2019s settings, which verifies it', async () => {
    // Everything the service wrote: the event log, the read models, their write-ahead logs.
    const written = Buffer.concat((await filesUnder(dir)).map((file) => file.bytes)).toString('latin1');
    expect(written).not.toContain(PASSWORD);
    const hashes = new Set([...written.matchAll(/\$scrypt\$ln=\d+,r=\d+,p=\d+\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+/g)].map((m) => m[0]));
    // Ada's and Bob's (the short password was refused).
    expect(hashes.size).toBe(2);
    for (const hash of hashes) {
      const [, settings, salt, key] = hash.slice(1).split('$');
      const { ln, r, p } = Object.fromEntries(settings!.split(',').map((s) => s.split('=')).map(([k, v]) => [k, Number(v)]));
      // N = 2^15, r = 8, p = 3 or costlier: 32 MiB and about a tenth of a second per guess, not a fast hash.
      expect(ln).toBeGreaterThanOrEqual(15);
      expect(r).toBe(8);
      expect(p).toBeGreaterThanOrEqual(3);
      const derive = (password: string) =>
        scryptSync(password, Buffer.from(salt!, 'base64url'), 32, { N: 2 ** ln!, r, p, maxmem: 256 * 2 ** ln! * r! }).toString('base64url');
      expect(derive(PASSWORD)).toBe(key);
      expect(derive(`${PASSWORD}!`)).not.toBe(key);
    }
  });

  it('marks the cookie Secure unless the browser came over plain http to a loopback name', async () => {
    const secure = (cookie: string) => /; Secure(;|$)/.test(cookie);
    const port = new URL(app.url).port;
    // A developer's own machine, where a browser may drop a Secure cookie.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) expect(secure(await signInCookie(app.url, { host })), host).toBe(false);
    // Any other name: a deployment, whichever process serves it.
    expect(secure(await signInCookie(app.url, { host: 'console.example.com' }))).toBe(true);
    // X-Forwarded-Proto counts only from a trusted proxy.
    expect(secure(await signInCookie(app.url, { 'x-forwarded-proto': 'https' }))).toBe(false);

    // Behind a trusted proxy that terminates TLS; and CONSOLE_COOKIE_SECURE=0 (plain http across a network) overriding it all.
    for (const [settings, expected] of [
      [{ TRUSTED_PROXIES: 'loopback' }, { https: true, loopback: false, elsewhere: true }],
      [{ TRUSTED_PROXIES: 'loopback', CONSOLE_COOKIE_SECURE: '0' }, { https: false, loopback: false, elsewhere: false }],
    ] as const) {
      const other = await startStandalone({
        config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: await mkdtemp(join(dir, 'cookie-')), ADMIN_TOKEN, LOG_LEVEL: 'silent', ...settings }),
      });
      try {
        const seen = {
          https: secure(await signInCookie(other.url, { 'x-forwarded-proto': 'https' })),
          loopback: secure(await signInCookie(other.url, {})),
          elsewhere: secure(await signInCookie(other.url, { host: 'console.example.com' })),
        };
        expect(seen, JSON.stringify(settings)).toEqual(expected);
      } finally {
        await other.close();
      }
    }
  });

  it('signs a member in with an HttpOnly, SameSite cookie and shows only its organization', async () => {
    const ada = browser(app.url);
    expect((await ada.call('GET', '/console/v1/balance')).body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_session' });
    const wrong = await ada.call('POST', '/console/v1/sessions', { email: 'ada@acme.test', password: 'not the password' });
    expect(wrong).toMatchObject({ status: 401, body: { error: { type: 'authentication_error', code: 'invalid_credentials' } } });
    const unknown = await ada.call('POST', '/console/v1/sessions', { email: 'nobody@acme.test', password: 'not the password' });
    expect(unknown.body).toEqual(wrong.body);

    const signedIn = await ada.call('POST', '/console/v1/sessions', { email: 'ADA@acme.test', password: PASSWORD });
    expect(signedIn.status).toBe(200);
    expect(signedIn.body).toMatchObject({ object: 'console_session', kind: 'member', organization: { id: acme, name: 'Acme' }, member: { email: 'ada@acme.test' } });
    const setCookie = signedIn.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^oc_console=[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/console\/v1; HttpOnly; SameSite=Strict$/);

    expect((await ada.call('GET', '/console/v1/balance')).body).toMatchObject({ organization_id: acme, available: 5 });
    expect((await ada.call('GET', '/console/v1/session')).body.csrf_token).toBe(signedIn.body.csrf_token);
    // The organization is the session's: nothing in the request can name another.
    expect((await ada.call('GET', `/console/v1/organization?org_id=${globex}`)).body.id).toBe(acme);
    // Operator operations are not a member's.
    expect((await ada.call('GET', '/console/v1/admin/organizations')).body.error).toMatchObject({ type: 'permission_error', code: 'operator_session_required' });
  });

  it('needs the CSRF token and a same-origin request for every change', async () => {
    const ada = browser(app.url);
    await ada.call('POST', '/console/v1/sessions', { email: 'ada@acme.test', password: PASSWORD });
    const body = { name: 'ci', scopes: ['video:read'] };
    const noToken = await ada.call('POST', '/console/v1/keys', body, { 'x-csrf-token': '' });
    expect(noToken).toMatchObject({ status: 403, body: { error: { type: 'permission_error', code: 'invalid_csrf_token', param: 'X-CSRF-Token' } } });
    const crossSite = await ada.call('POST', '/console/v1/keys', body, { origin: 'https://evil.example' });
    expect(crossSite).toMatchObject({ status: 403, body: { error: { code: 'cross_origin_request' } } });
    const created = await ada.call('POST', '/console/v1/keys', body, { origin: app.url });
    expect(created).toMatchObject({ status: 200, body: { object: 'api_key', name: 'ci', key: expect.stringMatching(/^oc_live_/) } });

    // The key works on /v1, and the console's revoke stops it on the next request.
    const balance = () => fetch(`${app.url}/v1/account/balance`, { headers: { authorization: `Bearer ${created.body.key}` } });
    expect((await balance()).status).toBe(200);
    expect((await ada.call('DELETE', `/console/v1/keys/${created.body.id}`)).body.revoked_at).toEqual(expect.any(Number));
    expect((await balance()).status).toBe(401);
    // Errors from the services come in the spec's shape, as on /v1.
    expect((await ada.call('POST', '/console/v1/keys', { name: 'x', scopes: ['video:fly'] })).body.error).toMatchObject({ type: 'invalid_request_error', param: 'scopes[0]' });
    expect((await ada.call('GET', '/console/v1/videos/video_nope')).body.error.code).toBe('video_not_found');
  });

  it('keeps one organization\u2019s members out of another\u2019s data (404, as on /v1)', async () => {
    const ada = browser(app.url);
    await ada.call('POST', '/console/v1/sessions', { email: 'ada@acme.test', password: PASSWORD });
    const hook = await ada.call('POST', '/console/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['video.completed'] });
    expect(hook.body).toMatchObject({ id: expect.stringMatching(/^wh_/), secret: expect.stringMatching(/^whsec_/) });

    const bob = browser(app.url);
    await bob.call('POST', '/console/v1/sessions', { email: 'bob@globex.test', password: PASSWORD });
    expect((await bob.call('GET', '/console/v1/webhooks')).body.data).toEqual([]);
    expect((await bob.call('GET', `/console/v1/webhooks/${hook.body.id}`)).status).toBe(404);
    expect((await bob.call('PATCH', `/console/v1/webhooks/${hook.body.id}`, { is_active: false })).status).toBe(404);
    expect((await bob.call('GET', '/console/v1/keys')).body.data).toEqual([]);
    expect((await bob.call('GET', '/console/v1/ledger')).body.data).toEqual([]);
  });

  it('ends a session on sign-out and when its member is removed', async () => {
    await admin('POST', `/organizations/${acme}/members`, { email: 'carol@acme.test', password: PASSWORD });
    const carol = browser(app.url);
    await carol.call('POST', '/console/v1/sessions', { email: 'carol@acme.test', password: PASSWORD });
    const cookie = carol.cookie();
    const out = await carol.call('DELETE', '/console/v1/session');
    expect(out.body).toEqual({ object: 'console_session', deleted: true });
    expect(out.headers.get('set-cookie')).toMatch(/^oc_console=; Max-Age=0;/);
    // The old cookie, replayed, is refused.
    carol.setCookie(cookie);
    expect((await carol.call('GET', '/console/v1/balance')).status).toBe(401);

    const again = browser(app.url);
    await again.call('POST', '/console/v1/sessions', { email: 'carol@acme.test', password: PASSWORD });
    const carolId = (await admin('GET', `/organizations/${acme}/members`)).body.data.find((m: { email: string }) => m.email === 'carol@acme.test').id;
    await admin('DELETE', `/organizations/${acme}/members/${carolId}`);
    expect((await again.call('GET', '/console/v1/balance')).body.error.code).toBe('invalid_session');
    expect((await again.call('POST', '/console/v1/sessions', { email: 'carol@acme.test', password: PASSWORD })).status).toBe(401);
  });

  it('lets an operator sign in with the admin token and reach the admin operations', async () => {
    const op = browser(app.url);
    expect((await op.call('POST', '/console/v1/sessions', { admin_token: 'wrong-token-0123456789' })).body.error.code).toBe('invalid_admin_token');
    expect((await op.call('POST', '/console/v1/sessions', { admin_token: ADMIN_TOKEN })).body).toMatchObject({ kind: 'operator', member: null, organization: null });
    const orgs = await op.call('GET', '/console/v1/admin/organizations?limit=100');
    expect(orgs.body.data.map((o: { id: string }) => o.id)).toEqual(expect.arrayContaining([acme, globex]));
    expect((await op.call('POST', `/console/v1/admin/organizations/${globex}/credits`, { amount: 2.5 })).body).toMatchObject({ available: 2.5 });
    expect((await op.call('PATCH', `/console/v1/admin/organizations/${globex}`, { tier: 'enterprise', limits: { requests_per_minute: 5000 } })).body).toMatchObject({
      tier: 'enterprise',
      limits: { requests_per_minute: 5000 },
    });
    // An operator is nobody's member: organization pages need a member.
    expect((await op.call('GET', '/console/v1/balance')).body.error.code).toBe('member_session_required');
  });

  it('exports the ledger as CSV with the running balance', async () => {
    const ada = browser(app.url);
    await ada.call('POST', '/console/v1/sessions', { email: 'ada@acme.test', password: PASSWORD });
    const csv = await ada.call('GET', '/console/v1/ledger.csv');
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toBe(`attachment; filename="ledger-${acme}.csv"`);
    const lines = String(csv.body).trim().split('\r\n');
    expect(lines[0]).toBe('id,created,type,amount_usd,charged_usd,available_after_usd,description,reference');
    expect(lines.at(-1)).toMatch(/^le_[^,]+,\d{4}-\d\d-\d\dT[^,]+,credit,5,0,5,Credit,$/);
  });

  it('limits failed sign-ins per email at an address and per address, so that a guesser cannot lock a member out', async () => {
    // Behind a trusted proxy, so that each request can come from the address its X-Forwarded-For names.
    const other = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: await mkdtemp(join(dir, 'limits-')), ADMIN_TOKEN, LOG_LEVEL: 'silent', TRUSTED_PROXIES: 'loopback' }),
    });
    try {
      const asAdmin = (path: string, body: unknown) =>
        fetch(`${other.url}/admin/v1${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((r) => r.json() as Promise<any>);
      const org = await asAdmin('/organizations', { name: 'Initech', tier: 'free' });
      await asAdmin(`/organizations/${org.id}/members`, { email: 'dave@initech.test', password: PASSWORD });
      const signIn = async (address: string, email: string, password: string) => {
        const res = await fetch(`${other.url}/console/v1/sessions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
          body: JSON.stringify({ email, password }),
        });
        const text = await res.text();
        await expectConformance(other.url, 'POST', new URL('/console/v1/sessions', other.url), res.status, res.headers, text);
        return { status: res.status, retryAfter: res.headers.get('retry-after'), body: JSON.parse(text) as any };
      };

      const mallory = '203.0.113.66';
      for (let i = 0; i < 10; i++) expect((await signIn(mallory, 'dave@initech.test', `guess ${i}`)).status).toBe(401);
      // Refused before the password is checked: the right one is no answer either, from there.
      const refused = await signIn(mallory, 'dave@initech.test', PASSWORD);
      expect(refused).toMatchObject({ status: 429, retryAfter: '900', body: { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } } });
      // Dave, at his own address, signs in while Mallory is held up.
      expect((await signIn('198.51.100.7', 'dave@initech.test', PASSWORD)).status).toBe(200);

      // Mallory's address has ten failures left in all, whichever emails it tries; then every sign-in from it waits.
      for (let i = 0; i < 10; i++) expect((await signIn(mallory, `someone${i}@initech.test`, 'a wrong password')).status).toBe(401);
      expect((await signIn(mallory, 'anyone@initech.test', 'a wrong password')).status).toBe(429);
      expect((await signIn('198.51.100.7', 'dave@initech.test', PASSWORD)).status).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('serves the console itself at /dashboard with a strict content security policy', async () => {
    const redirect = await fetch(`${app.url}/dashboard`, { redirect: 'manual' });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/dashboard/');
    for (const path of ['/dashboard/', '/dashboard/keys', '/dashboard/webhooks?x=1']) {
      const page = await fetch(`${app.url}${path}`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
      // Under `no-referrer` a browser would send `Origin: null` on the page's changes, which the console API refuses.
      expect(page.headers.get('referrer-policy')).toBe('same-origin');
      const html = await page.text();
      expect(html).toContain('<div id="root">');
      const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)![1]!;
      const asset = await fetch(`${app.url}${script}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    }
    expect((await fetch(`${app.url}/dashboard/assets/nope.js`)).status).toBe(404);
  });
});
