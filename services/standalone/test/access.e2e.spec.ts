/**
 * Access, generated from the gateway's route table so that a new endpoint is covered without editing
 * this file: every endpoint × every scope (403 exactly when the key lacks the route's scope), every
 * endpoint without credentials or with the wrong kind of credential (401), and every id an endpoint takes
 * (in its path or body) tried by another organization (404, as if it did not exist).
 */
import { SCOPES } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { adminRoutes } from '../../gateway/src/transport/admin-routes';
import { type ConsoleRoute, consoleRoutes } from '../../gateway/src/transport/console-routes';
import type { Route } from '../../gateway/src/transport/routes';
import { v1Routes } from '../../gateway/src/transport/v1-routes';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { conformingFetch } from './conformance';
import { embedded, type RunningService } from './harness';

const publicRoutes = v1Routes('test', Date.now) as Route<unknown>[];
const operatorRoutes = adminRoutes() as Route<unknown>[];
/** The web console's API; its session handlers are not called here, so they need no sessions object. */
const consoleTable: ConsoleRoute[] = consoleRoutes(v1Routes('test', Date.now), adminRoutes(), undefined as never);
const label = (route: Route<unknown>) => `${route.method} ${route.path}`;
/** Path parameters that name something every organization shares (a model), not a resource one owns. */
const SHARED_IDS: Record<string, string> = { model: 'chat-2' };

/** The spec's scope table (Authentication, 4), word for word; the other routes' scopes are ours (README). */
const SPEC_SCOPES: Record<string, string> = {
  'GET /v1/videos': 'video:read',
  'GET /v1/videos/:id': 'video:read',
  'POST /v1/videos': 'video:write',
  'POST /v1/videos/:id/remix': 'video:write',
  'DELETE /v1/videos/:id': 'video:delete',
  'GET /v1/chat/completions': 'chat:read',
  'GET /v1/chat/completions/:id': 'chat:read',
  'POST /v1/chat/completions': 'chat:write',
  'POST /v1/completions': 'text:write',
  'GET /v1/webhooks': 'webhook:read',
  'GET /v1/webhooks/:webhook_id': 'webhook:read',
  'POST /v1/webhooks': 'webhook:write',
  'PATCH /v1/webhooks/:webhook_id': 'webhook:write',
  'DELETE /v1/webhooks/:webhook_id': 'webhook:delete',
};

/** A body each endpoint accepts, so that a refusal can only be about who is asking. */
const VALID_BODIES: Record<string, unknown> = {
  'POST /v1/videos/:id/remix': { prompt: 'The same boat, at night' },
  'PATCH /v1/webhooks/:webhook_id': { description: 'renamed' },
  'POST /v1/webhooks/:webhook_id/recover': { since: 0 },
};
const bodyFor = (route: Route<unknown>) => (route.method === 'GET' || route.method === 'DELETE' ? undefined : (VALID_BODIES[label(route)] ?? {}));

describe('access, from the route table', () => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let receiver: Receiver;
  /** One key per scope, each holding that scope alone, in one organization. */
  const keyWith = new Map<string, string>();
  let owner: { orgId: string; key: string };
  let stranger: { orgId: string; key: string };
  const owned = { video: '', session: '', response: '', webhook: '', delivery: '' };

  /** The embedded clock is the test's: each poll moves it so the simulated video finishes. */
  const eventually = <T>(probe: () => Promise<T>) =>
    vi.waitFor(
      async () => {
        service.clock?.advance(200);
        return probe();
      },
      { timeout: 20_000, interval: 50 },
    );

  /** Fills a route's path with ids that exist, in the owner's organization. */
  function pathFor(route: Route<unknown>, ids: typeof owned): string {
    return route.path.replace(/:([a-z_]+)/g, (_, name: string) => {
      if (name in SHARED_IDS) return SHARED_IDS[name]!;
      if (name === 'webhook_id') return ids.webhook;
      if (name === 'delivery_id') return ids.delivery;
      if (name === 'id' && route.path.startsWith('/v1/videos/')) return ids.video;
      if (name === 'id' && route.path.startsWith('/v1/chat/completions/')) return ids.session;
      if (name === 'id' && route.path.startsWith('/v1/responses/')) return ids.response;
      throw new Error(`No fixture for :${name} in ${label(route)}: add one so that cross-organization access to it is tested.`);
    });
  }

  beforeAll(async () => {
    receiver = await httpReceiver();
    // Every route is tried three times without a valid key: more than one address's default failure window.
    service = await embedded({ AUTH_FAILURES_PER_MINUTE: '10000', SIM_VIDEO_DURATION_MS: '1000', SIM_VIDEO_POLL_MS: '100', WEBHOOK_MODE: 'development', WEBHOOK_ALLOW_PRIVATE: '1' });
    api = clientFor(service);
    const generous = { rate_limit_per_minute: 100_000 };
    const scoped = await api.newCustomer({ tier: 'enterprise', scopes: [SCOPES[0]], key: generous });
    for (const scope of SCOPES) {
      const key = await api.admin('POST', `/organizations/${scoped.orgId}/keys`, { name: scope, scopes: [scope], ...generous });
      keyWith.set(scope, key.body.key);
    }
    owner = await api.newCustomer({ tier: 'enterprise', credit: 20, scopes: [...SCOPES], key: generous });
    stranger = await api.newCustomer({ tier: 'enterprise', credit: 20, scopes: [...SCOPES], key: generous });

    const as = (method: string, path: string, body?: unknown) => api.call(method, path, { token: owner.key, ...(body ? { body } : {}) });
    const video = await as('POST', '/v1/videos', { model: 'video-2', prompt: 'A paper boat', seconds: '4', size: '1280x720' });
    owned.video = video.body.id;
    owned.session = (await as('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 })).body.session_id;
    owned.response = (await as('POST', '/v1/responses', { model: 'chat-2', input: 'Hi', max_output_tokens: 8 })).body.id;
    owned.webhook = (await as('POST', '/v1/webhooks', { url: receiver.url, events: ['video.completed'] })).body.id;
    await eventually(async () => expect((await as('GET', `/v1/videos/${owned.video}`)).body.status).toBe('completed'));
    // The video's completion is delivered to the webhook: that delivery is the fixture for its routes.
    owned.delivery = await eventually(async () => {
      const log = await as('GET', `/v1/webhooks/${owned.webhook}/deliveries`);
      expect(log.body.data).toHaveLength(1);
      return log.body.data[0].delivery_id as string;
    });
    for (const [name, id] of Object.entries(owned)) expect(id, name).toEqual(expect.any(String));
  }, 60_000);
  afterAll(async () => {
    await service?.stop();
    await receiver?.close();
  });

  it("declares the spec's scope for every endpoint the spec names, and every scope is needed by some route", () => {
    const declared = Object.fromEntries(publicRoutes.map((route) => [label(route), route.scope]));
    for (const [endpoint, scope] of Object.entries(SPEC_SCOPES)) expect(declared[endpoint], endpoint).toBe(scope);
    const needed = new Set(publicRoutes.map((r) => r.scope).filter(Boolean));
    expect([...needed].sort()).toEqual([...SCOPES].sort());
  });

  describe.each(publicRoutes.map((route) => [label(route), route] as const))('%s', (_name, route) => {
    // Ids that exist nowhere: a scope check must not depend on what the id names.
    const path = route.path.replace(/:([a-z_]+)/g, (_, name: string) => `${name}_doesnotexist`);

    it(`answers each single-scope key: ${route.scope ? `403 unless it holds ${route.scope}` : 'never 403'}`, async () => {
      for (const scope of SCOPES) {
        const res = await api.call(route.method, path, { token: keyWith.get(scope)!, body: bodyFor(route) });
        if (route.scope && scope !== route.scope) {
          expect(res.status, scope).toBe(403);
          expect(res.body.error, scope).toMatchObject({
            type: 'permission_error',
            code: 'insufficient_scope',
            message: expect.stringContaining(route.scope),
          });
        } else {
          expect([401, 403], scope).not.toContain(res.status);
        }
      }
    });

    it('answers 401 without a key, with a made-up key, and with the admin token', async () => {
      for (const token of [null, 'sk-live-madeup0000000000000000000000', service.adminToken]) {
        const res = await api.call(route.method, path, { token, body: bodyFor(route) });
        expect(res.status, String(token)).toBe(401);
        expect(res.body.error).toMatchObject({ type: 'authentication_error', code: expect.any(String) });
      }
    });
  });

  describe.each(operatorRoutes.map((route) => [label(route), route] as const))('%s', (_name, route) => {
    it('answers 401 to an API key holding every scope, and to no credential', async () => {
      const path = route.path.replace(/:([a-z_]+)/g, () => owner.orgId);
      for (const token of [owner.key, null]) {
        const res = await api.call(route.method, path, { token, body: bodyFor(route) });
        expect(res.status).toBe(401);
        expect(res.body.error.type).toBe('authentication_error');
      }
    });
  });

  it("never lists another organization's resources, and a session id in a body is refused with 404", async () => {
    const continued = await api.call('POST', '/v1/chat/completions', {
      token: stranger.key,
      body: { model: 'chat-2', session_id: owned.session, messages: [{ role: 'user', content: 'And then?' }], max_tokens: 8 },
    });
    expect(continued.status).toBe(404);
    for (const route of publicRoutes.filter((r) => r.method === 'GET' && !r.path.includes(':'))) {
      const res = await api.call('GET', route.path, { token: stranger.key });
      expect(res.status, label(route)).toBe(200);
      const text = JSON.stringify(res.body);
      for (const id of Object.values(owned)) expect(text, label(route)).not.toContain(id);
      expect(text, label(route)).not.toContain(owner.orgId);
    }
  });

  it('lets no body name the organization it acts for: the contracts refuse the field', async () => {
    const video = await api.call('POST', '/v1/videos', {
      token: stranger.key,
      body: { model: 'video-2', prompt: 'A paper boat', seconds: '4', size: '1280x720', org_id: owner.orgId },
    });
    expect(video.status).toBe(400);
    expect(video.body.error).toMatchObject({ code: 'unknown_parameter', param: 'org_id' });
    const before = await api.call('GET', '/v1/account/balance', { token: owner.key });
    const chat = await api.call('POST', '/v1/chat/completions', {
      token: stranger.key,
      body: { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, org_id: owner.orgId },
    });
    expect(chat.status).toBe(400);
    expect(chat.body.error).toMatchObject({ code: 'unsupported_parameter', param: 'org_id' });
    const response = await api.call('POST', '/v1/responses', { token: stranger.key, body: { model: 'chat-2', input: 'Hi', org_id: owner.orgId } });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'unsupported_parameter', param: 'org_id' });
    expect((await api.call('GET', '/v1/account/balance', { token: owner.key })).body).toEqual(before.body);
  });

  const withIds = publicRoutes.filter((route) => [...route.path.matchAll(/:([a-z_]+)/g)].some(([, name]) => !(name! in SHARED_IDS)));
  // Deletions go last so that every other route still finds what it names when the owner calls it.
  const ownerOrder = [...withIds].sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));

  describe('the console API (/console/v1), from its route table', () => {
    const PASSWORD = 'correct horse battery staple';
    /** A signed-in browser: its cookie and CSRF token, sent on every call. */
    const sessions: Record<'owner' | 'stranger' | 'operator', { cookie: string; csrf: string }> = {} as never;
    let ownerKeyId = '';
    const signIn = async (body: unknown) => {
      const res = await conformingFetch(service.url, `${service.url}/console/v1/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      return { cookie: res.headers.get('set-cookie')!.split(';')[0]!, csrf: ((await res.json()) as { csrf_token: string }).csrf_token };
    };
    type Session = (typeof sessions)[keyof typeof sessions];
    const call = async (who: keyof typeof sessions | Session | null, route: Route<unknown>, path: string, extra: Record<string, string> = {}) => {
      const session = typeof who === 'string' ? sessions[who] : (who ?? undefined);
      // A change each PATCH accepts, so that only whose the id is decides the answer.
      const patch = route.path.includes('/keys/') ? { name: 'renamed' } : { is_active: true };
      const body = route.method === 'PATCH' ? patch : route.method === 'POST' ? {} : undefined;
      const res = await conformingFetch(service.url, `${service.url}${path}`, {
        method: route.method,
        headers: {
          ...(session ? { cookie: session.cookie, 'x-csrf-token': session.csrf } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...extra,
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: (text.startsWith('{') ? JSON.parse(text) : text) as any };
    };
    const consolePath = (route: Route<unknown>) =>
      route.path.replace(/:([a-z_]+)/g, (_, name: string) => {
        if (name === 'webhook_id') return owned.webhook;
        if (name === 'delivery_id') return owned.delivery;
        if (name === 'key_id') return ownerKeyId;
        if (name === 'id' && route.path.startsWith('/console/v1/videos/')) return owned.video;
        if (name === 'id' && route.path.startsWith('/console/v1/chat/sessions/')) return owned.session;
        if (name === 'org_id') return owner.orgId;
        if (name === 'member_id') return 'mem_doesnotexist';
        throw new Error(`No fixture for :${name} in ${label(route)}: add one so that cross-organization access to it is tested.`);
      });
    const member = consoleTable.filter((r) => r.who === 'member');

    beforeAll(async () => {
      for (const [who, org] of [['owner', owner.orgId], ['stranger', stranger.orgId]] as const) {
        await api.admin('POST', `/organizations/${org}/members`, { email: `${who}@access.test`, password: PASSWORD });
        sessions[who] = await signIn({ email: `${who}@access.test`, password: PASSWORD });
      }
      sessions.operator = await signIn({ admin_token: service.adminToken });
      ownerKeyId = (await api.admin('GET', `/organizations/${owner.orgId}/keys`)).body.data[0].id;
    });

    it('answers 401 invalid_session to every route but sign-in without a session', async () => {
      for (const route of consoleTable.filter((r) => r.who !== 'anyone')) {
        const res = await call(null, route, consolePath(route));
        expect(res.status, label(route)).toBe(401);
        expect(res.body.error, label(route)).toMatchObject({ type: 'authentication_error', code: 'invalid_session' });
      }
    });

    it("keeps members to their organization's pages and operators to the admin operations (403)", async () => {
      for (const route of consoleTable.filter((r) => r.who === 'operator')) {
        expect((await call('owner', route, consolePath(route))).body.error?.code, label(route)).toBe('operator_session_required');
      }
      for (const route of member) {
        expect((await call('operator', route, consolePath(route))).body.error?.code, label(route)).toBe('member_session_required');
      }
    });

    it('refuses every change from a foreign or a null Origin (403), with a valid session and CSRF token', async () => {
      const changes = consoleTable.filter((r) => r.method !== 'GET');
      expect(changes.length).toBeGreaterThan(0);
      // Sessions of their own, and ids of nothing, so that a change let through alters no other test's fixtures.
      const member = await signIn({ email: 'stranger@access.test', password: PASSWORD });
      const operator = await signIn({ admin_token: service.adminToken });
      for (const route of changes) {
        const path = route.path.replace(/:([a-z_]+)/g, 'nothing_here');
        for (const origin of ['null', 'https://evil.example']) {
          const res = await call(route.who === 'operator' ? operator : member, route, path, { origin });
          expect(res.status, `${label(route)} from ${origin}`).toBe(403);
          expect(res.body.error, `${label(route)} from ${origin}`).toMatchObject({ type: 'permission_error', code: 'cross_origin_request' });
        }
      }
      // The console's own origin passes the check (refused, if at all, for something else).
      const same = await call(member, changes.find((r) => r.method === 'DELETE' && r.path === '/console/v1/keys/:key_id')!, '/console/v1/keys/nothing_here', {
        origin: service.url,
      });
      expect(same.body.error?.code).not.toBe('cross_origin_request');
    });

    it("answers 404 to another organization's member for every id of the owner's, which the owner reads", async () => {
      for (const route of member.filter((r) => r.path.includes(':'))) {
        const res = await call('stranger', route, consolePath(route));
        expect(res.status, label(route)).toBe(404);
        expect(res.body.error.type, label(route)).toBe('invalid_request_error');
      }
      for (const route of member.filter((r) => r.path.includes(':') && r.method === 'GET')) {
        expect((await call('owner', route, consolePath(route))).status, label(route)).toBe(200);
      }
      // Lists: the stranger's show none of the owner's ids.
      for (const route of member.filter((r) => r.method === 'GET' && !r.path.includes(':'))) {
        const res = await call('stranger', route, route.path);
        expect(res.status, label(route)).toBe(200);
        const text = JSON.stringify(res.body);
        for (const id of [...Object.values(owned), ownerKeyId, owner.orgId]) expect(text, label(route)).not.toContain(id);
      }
    });
  });

  it('answers 404 to another organization for every id-taking route, and the owner finds the same ids', async () => {
    for (const route of withIds) {
      const res = await api.call(route.method, pathFor(route, owned), { token: stranger.key, body: bodyFor(route) });
      expect(res.status, label(route)).toBe(404);
      expect(res.body.error.type, label(route)).toBe('invalid_request_error');
    }
    for (const route of ownerOrder) {
      const res = await api.call(route.method, pathFor(route, owned), { token: owner.key, body: bodyFor(route) });
      expect([401, 403, 404], `${label(route)} as the owner: ${JSON.stringify(res.body).slice(0, 200)}`).not.toContain(res.status);
    }
  });

});
