import {
  type ConsolePrincipal,
  ConsoleSessionSchema,
  type KeyPrincipal,
  type LedgerEntry,
  parseOrThrow,
  SCOPES,
  SignedOutSchema,
  SignInBody,
  Subjects,
  unwrap,
  VideoPriceListSchema,
} from '@oc/contracts';
import type { Request, Response } from 'express';
import type { ConsoleSessions } from '../application/console-sessions';
import { topUpRoute } from './payment-routes';
import { autoRechargeRoutes } from './auto-recharge-routes';
import { csvCell } from './csv';
import type { Route, RouteContext } from './routes';
import { consoleUsageRoute } from './usage-routes';

/**
 * Who may call a console route: anyone (signing in), any session (reading or ending itself), a member of an
 * organization (that organization's pages), or an operator (the admin API's operations).
 */
export type ConsoleAudience = 'anyone' | 'session' | 'member' | 'operator';

export interface ConsoleRoute extends Route<ConsolePrincipal> {
  who: ConsoleAudience;
}

type Member = Extract<ConsolePrincipal, { kind: 'member' }>;

/**
 * The console's API is served by the gateway's Express app (`consoleApi`), so its requests are Express's:
 * a session is bound to the client's address and scheme as Express reads them behind TRUSTED_PROXIES.
 */
const underExpress = (ctx: RouteContext<unknown>) => [ctx.req as Request, ctx.res as Response] as const;

/**
 * A member acts with its organization's rights through the very routes API keys use: the principal those
 * routes see is a key of the organization holding every scope, in live mode. The session's own window
 * limits it (see the console middleware); the organization's API windows are its API keys' business.
 */
const keyPrincipalOf = (m: Member): KeyPrincipal => ({
  key_id: m.session_id,
  org_id: m.organization.id,
  mode: 'live',
  scopes: [...SCOPES],
  rate_limit_per_minute: 0,
  tier: m.organization.tier,
  limits: m.organization.limits,
  expires_at: m.expires_at,
  allowed_models: null,
});

function pick<P>(routes: Route<P>[], method: string, path: string): Route<P> {
  const route = routes.find((r) => r.method === method && r.path === path);
  if (!route) throw new Error(`The console reuses ${method} ${path}, which no longer exists`);
  return route;
}

const ORG = '/admin/v1/organizations/:org_id';

/**
 * `/console/v1`: the web console's API. Every operation but the session's own is a route of `/v1` or
 * `/admin/v1` reached with a session instead of a key or the admin token, so the console can do nothing
 * the public API cannot, and answers with the same bodies and errors.
 */
export function consoleRoutes(v1: Route[], admin: Route<'admin'>[], sessions: ConsoleSessions): ConsoleRoute[] {
  const asMember = (method: string, from: string, path: string): ConsoleRoute => {
    const route = pick(v1, method, from);
    return {
      ...route,
      path,
      scope: null,
      who: 'member',
      handle: (ctx) => route.handle({ ...ctx, principal: keyPrincipalOf(ctx.principal as Member) }),
    };
  };
  /** An admin operation on one organization, for a member of that organization: the org id is the session's. */
  const ownOrganization = (method: string, from: string, path: string): ConsoleRoute => {
    const route = pick(admin, method, from);
    return {
      ...route,
      path,
      who: 'member',
      handle: (ctx) =>
        route.handle({ ...ctx, principal: 'admin', params: { ...ctx.params, org_id: (ctx.principal as Member).organization.id } }),
    };
  };
  const asOperator = (route: Route<'admin'>): ConsoleRoute => ({
    ...route,
    path: route.path.replace(/^\/admin\/v1/, '/console/v1/admin'),
    who: 'operator',
    handle: (ctx) => route.handle({ ...ctx, principal: 'admin' }),
  });

  const session: ConsoleRoute[] = [
    {
      method: 'POST',
      path: '/console/v1/sessions',
      scope: null,
      who: 'anyone',
      doc: {
        summary: 'Sign in to the console (a member: email and password; an operator: the admin token); sets the session cookie',
        request: SignInBody,
        response: ConsoleSessionSchema,
        // Wrong credentials, and a sign-in from another site's page.
        errors: [401, 403],
      },
      handle: async (ctx) => ({ ok: true, data: await sessions.signIn(...underExpress(ctx), parseOrThrow(SignInBody, ctx.body)) }),
    },
    {
      method: 'GET',
      path: '/console/v1/session',
      scope: null,
      who: 'session',
      doc: { summary: 'The current console session, with its CSRF token', response: ConsoleSessionSchema },
      handle: async (ctx) => ({ ok: true, data: sessions.view(underExpress(ctx)[0], ctx.principal) }),
    },
    {
      method: 'DELETE',
      path: '/console/v1/session',
      scope: null,
      who: 'session',
      doc: { summary: 'Sign out: the session ends on every gateway and its cookie is cleared', response: SignedOutSchema },
      handle: async (ctx) => {
        await sessions.signOut(...underExpress(ctx));
        return { ok: true, data: { object: 'console_session', deleted: true } };
      },
    },
  ];

  const member: ConsoleRoute[] = [
    ownOrganization('GET', ORG, '/console/v1/organization'),
    ownOrganization('PATCH', `${ORG}/alerts`, '/console/v1/organization/alerts'),
    ownOrganization('GET', `${ORG}/balance`, '/console/v1/balance'),
    ownOrganization('GET', `${ORG}/spend`, '/console/v1/spend'),
    ownOrganization('GET', `${ORG}/ledger`, '/console/v1/ledger'),
    {
      method: 'GET',
      path: '/console/v1/ledger.csv',
      scope: null,
      who: 'member',
      doc: { summary: 'The whole ledger as CSV, newest first, with the available balance after each entry', media: ['text/csv'] },
      handle: (ctx) => sendLedgerCsv(ctx, (ctx.principal as Member).organization.id),
    },
    ownOrganization('GET', `${ORG}/keys`, '/console/v1/keys'),
    ownOrganization('POST', `${ORG}/keys`, '/console/v1/keys'),
    ownOrganization('PATCH', `${ORG}/keys/:key_id`, '/console/v1/keys/:key_id'),
    ownOrganization('DELETE', `${ORG}/keys/:key_id`, '/console/v1/keys/:key_id'),
    ownOrganization('GET', `${ORG}/key-usage`, '/console/v1/key-usage'),
    { ...consoleUsageRoute, who: 'member' },
    ownOrganization('GET', `${ORG}/activity`, '/console/v1/activity'),
    ownOrganization('GET', `${ORG}/payments`, '/console/v1/payments'),
    topUpRoute(),
    ...autoRechargeRoutes(),
    // The playground: a chat or a video started from the console, billed as through the API.
    asMember('GET', '/v1/models', '/console/v1/models'),
    asMember('POST', '/v1/chat/completions', '/console/v1/chat/completions'),
    asMember('POST', '/v1/videos', '/console/v1/videos'),
    {
      method: 'GET',
      path: '/console/v1/video-prices',
      scope: null,
      who: 'member',
      doc: { summary: "What a video costs per second, for each size of each model served (the playground's estimate)", response: VideoPriceListSchema },
      handle: ({ services, headers }) => services.request(Subjects.video.prices, {}, { headers }),
    },
    asMember('GET', '/v1/videos', '/console/v1/videos'),
    asMember('GET', '/v1/videos/:id', '/console/v1/videos/:id'),
    asMember('DELETE', '/v1/videos/:id', '/console/v1/videos/:id'),
    asMember('GET', '/v1/videos/:id/content', '/console/v1/videos/:id/content'),
    asMember('GET', '/v1/chat/completions', '/console/v1/chat/sessions'),
    asMember('GET', '/v1/chat/completions/:id', '/console/v1/chat/sessions/:id'),
    asMember('GET', '/v1/webhooks', '/console/v1/webhooks'),
    asMember('POST', '/v1/webhooks', '/console/v1/webhooks'),
    asMember('GET', '/v1/webhooks/:webhook_id', '/console/v1/webhooks/:webhook_id'),
    asMember('PATCH', '/v1/webhooks/:webhook_id', '/console/v1/webhooks/:webhook_id'),
    asMember('DELETE', '/v1/webhooks/:webhook_id', '/console/v1/webhooks/:webhook_id'),
    asMember('POST', '/v1/webhooks/:webhook_id/test', '/console/v1/webhooks/:webhook_id/test'),
    asMember('GET', '/v1/webhooks/:webhook_id/deliveries', '/console/v1/webhooks/:webhook_id/deliveries'),
    asMember('POST', '/v1/webhooks/:webhook_id/deliveries/:delivery_id/retry', '/console/v1/webhooks/:webhook_id/deliveries/:delivery_id/retry'),
  ];

  return [...session, ...member, ...admin.map(asOperator)];
}

const CSV_COLUMNS = ['id', 'created', 'type', 'amount_usd', 'charged_usd', 'available_after_usd', 'description', 'reference'];

/** Streams the ledger page by page (100 entries each), so an export of any length holds one page in memory. */
async function sendLedgerCsv(ctx: RouteContext<ConsolePrincipal>, orgId: string): Promise<void> {
  const { res } = ctx;
  let after: string | undefined;
  let started = false;
  for (;;) {
    const page = unwrap(
      await ctx.services.request<{ data: LedgerEntry[]; has_more: boolean }>(
        Subjects.billing.listLedger,
        { org_id: orgId, limit: 100, ...(after ? { after } : {}) },
        { headers: ctx.headers },
      ),
    );
    if (!started) {
      started = true;
      res.statusCode = 200;
      res.setHeader('Content-Type', 'text/csv; charset=utf-8');
      res.setHeader('Content-Disposition', `attachment; filename="ledger-${orgId}.csv"`);
      res.write(`${CSV_COLUMNS.join(',')}\r\n`);
    }
    const rows = page.data.map((e) =>
      [e.id, new Date(e.created * 1000).toISOString(), e.type, e.amount, e.charged, e.available_after, e.description, e.reference]
        .map(csvCell)
        .join(','),
    );
    if (rows.length > 0 && !res.write(`${rows.join('\r\n')}\r\n`)) await new Promise((r) => res.once('drain', r));
    if (res.destroyed) return;
    if (!page.has_more || page.data.length === 0) break;
    after = page.data.at(-1)!.id;
  }
  res.end();
}
