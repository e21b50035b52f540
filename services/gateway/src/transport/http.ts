import { timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { parse as parseQuery } from 'node:querystring';
import {
  ApiError,
  type Clock,
  PROBE_PATHS,
  invalidApiKey,
  insufficientScope,
  type KeyPrincipal,
  notFound,
  rateLimited,
  type Reply,
  toApiError,
} from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import { setHttpRoute } from '@oc/telemetry';
import express, { type NextFunction, type Request, type Response } from 'express';
import proxyAddr from 'proxy-addr';
import type { Logger } from 'pino';
import type { KeyAuthenticator } from '../application/authenticator';
import type { KeyUsageRecorder } from '../application/key-usage';
import type { RateLimits, RateLimitState } from '../application/rate-limits';
import { adminAuthWindow, anonymousWindow, DEFAULT_AUTH_FAILURES_PER_MINUTE, requestWindows } from '../domain/limits';
import { FailedAttempts } from '../application/failed-attempts';
import type { ConsoleSessions } from '../application/console-sessions';
import { consoleApi, dashboardFiles } from './console';
import type { ConsoleRoute } from './console-routes';
import { openApiDocument } from './openapi';
import { readBody } from './request-body';
import { nameRequest, noteOrganization, requestIdOf } from './request-id';
import { refuseModelNotAllowed } from './allowed-models';
import { compile, type Match, match, type Route, type RouteContext } from './routes';
import { STRIPE_WEBHOOK_PATH, stripeWebhook } from './stripe-webhook';

export interface GatewayDeps {
  services: ServiceClient;
  authenticator: KeyAuthenticator;
  limits: RateLimits;
  usage: KeyUsageRecorder;
  clock: Clock;
  logger: Logger;
  adminToken: string;
  /** The release, for the OpenAPI document. */
  version: string;
  v1: Route[];
  admin: Route<'admin'>[];
  /** The web console's API (`/console/v1`) and its sessions; absent, the gateway has no console API. */
  console?: { routes: ConsoleRoute[]; sessions: ConsoleSessions };
  /** Per client address, for requests that fail authentication (`AUTH_FAILURES_PER_MINUTE`), on `/v1` and on `/admin/v1` apart. */
  anonymousPerMinute?: number;
  /**
   * Addresses or CIDRs of the load balancers in front (`TRUSTED_PROXIES`): only a request from one of them
   * has its client address taken from `X-Forwarded-For`. None by default: the header is ignored.
   */
  trustedProxies?: string[];
  /** Extra readiness checks beyond the transport (e.g. each service's own ping). */
  ready: () => Promise<void>;
}

/**
 * The gateway's request listener. `/v1` and `/admin/v1`, the API itself, are matched against their own route
 * tables on Node's request and response: Express's router and response helpers cost the gateway's thread
 * about as much per request again as everything else it does for a read (profiled under load). The rest
 * (the console and its API, the reference, the probes) is an Express app.
 */
export function createGatewayApp(deps: GatewayDeps): RequestListener {
  const v1 = compile(deps.v1);
  const admin = compile(deps.admin);
  const adminHash = createHash('sha256').update(deps.adminToken).digest();
  const trusted = proxyAddr.compile(deps.trustedProxies ?? []);
  const web = expressApp(deps);
  const adminFailures = new FailedAttempts(deps.limits);

  const serveV1 = async (req: IncomingMessage, res: ServerResponse, method: string, path: string) => {
    let principal: KeyPrincipal;
    const anonymous = () => anonymousWindow(proxyAddr(req, trusted), deps.anonymousPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE);
    try {
      principal = await deps.authenticator.authenticate(req.headers.authorization, async () => {
        // An address that has spent its failed-authentication window gets no lookup for a key it may have made up.
        if (!(await deps.limits.peek(anonymous())).allowed) throw invalidApiKey();
      });
    } catch (error) {
      const outcome = await deps.limits.consume([anonymous()]);
      setRateLimitHeaders(res, outcome.headers);
      if (!outcome.allowed) return sendError(res, rateLimited(outcome.retryAfterSeconds, 'unauthenticated requests from this address'));
      return sendError(res, error, deps.logger);
    }

    const found = match(v1, method, path);
    if (found.kind === 'found') setHttpRoute(found.route.path);
    const chat = found.kind === 'found' && found.route.chat === true;
    const outcome = await deps.limits.consume(requestWindows(principal, chat));
    setRateLimitHeaders(res, outcome.headers);
    if (!outcome.allowed) return sendError(res, rateLimited(outcome.retryAfterSeconds, outcome.window.replace('_', ' per ')));
    deps.usage.record(principal.key_id);
    noteOrganization(res, principal.org_id);

    if (found.kind !== 'found') return sendError(res, refusal(res, found, method, path));
    if (found.route.scope && !principal.scopes.includes(found.route.scope)) {
      return sendError(res, insufficientScope(found.route.scope));
    }
    await run(found.route, found.params, principal, req, res, deps);
  };

  const serveAdmin = async (req: IncomingMessage, res: ServerResponse, method: string, path: string) => {
    // Per client address, so that a guesser elsewhere cannot lock the operator out.
    const failures = [adminAuthWindow(proxyAddr(req, trusted), deps.anonymousPerMinute ?? DEFAULT_AUTH_FAILURES_PER_MINUTE)];
    const limited = 'failed admin authentications from this address';
    await adminFailures.check(failures, limited);
    const token = /^Bearer +(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const presented = createHash('sha256').update(token ?? '').digest();
    if (!token || !timingSafeEqual(presented, adminHash)) {
      await adminFailures.failed(failures, limited);
      return sendError(
        res,
        new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_admin_token', message: 'Invalid admin token.' }),
      );
    }
    const found = match(admin, method, path);
    if (found.kind !== 'found') return sendError(res, refusal(res, found, method, path));
    setHttpRoute(found.route.path);
    await run(found.route, found.params, 'admin', req, res, deps);
  };

  const fromTrustedProxy = (req: IncomingMessage) => req.socket.remoteAddress !== undefined && trusted(req.socket.remoteAddress, 0);
  return (req, res) => {
    nameRequest(req, res, deps.logger, fromTrustedProxy);
    // Answers hold an organization's data: no shared cache may keep them, and no browser may guess their type.
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    const { path } = splitUrl(req.url ?? '/');
    const method = req.method ?? '';
    const served = isUnder(path, '/v1') ? serveV1(req, res, method, path) : isUnder(path, '/admin/v1') ? serveAdmin(req, res, method, path) : undefined;
    if (!served) return web(req, res);
    // Anything thrown outside a route's own handling still gets the spec's body, never a stack.
    served.catch((error: unknown) => {
      if (res.headersSent) res.end();
      else sendError(res, error, deps.logger);
    });
  };
}

/** A request target's path, and its query string (without the `?`) when it has one. */
function splitUrl(url: string): { path: string; query: string | undefined } {
  const start = url.indexOf('?');
  return start === -1 ? { path: url, query: undefined } : { path: url.slice(0, start), query: url.slice(start + 1) };
}

const isUnder = (path: string, prefix: string) => path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/');

/** Everything but the API: the contract, the reference, the probes, the console and its API. */
function expressApp(deps: GatewayDeps) {
  const app = express();
  app.disable('x-powered-by');
  // An API answer is never revalidated, and hashing every body for an ETag costs on each response.
  app.set('etag', false);
  app.set('trust proxy', deps.trustedProxies && deps.trustedProxies.length > 0 ? deps.trustedProxies : false);

  // The contract, public like the spec itself; built once, from the same routes and schemas that serve requests.
  let openApi: unknown;
  app.get('/openapi.json', (_req, res) => {
    openApi ??= openApiDocument(deps.version, deps.v1 as Route<unknown>[], deps.admin as Route<unknown>[], (deps.console?.routes ?? []) as Route<unknown>[]);
    res.json(openApi);
  });

  app.use('/docs', apiReference());

  app.get(PROBE_PATHS.liveness, (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get(PROBE_PATHS.readiness, async (_req, res) => {
    try {
      await deps.ready();
      res.json({ status: 'ready' });
    } catch (error) {
      deps.logger.debug({ err: error, request_id: requestIdOf(res) }, 'not ready');
      sendJson(res, 503, serviceUnavailableBody());
    }
  });

  if (deps.console) app.use('/console/v1', consoleApi(deps, deps.console.routes, deps.console.sessions));
  app.post(STRIPE_WEBHOOK_PATH, stripeWebhook(deps.services, deps.logger));
  app.use('/dashboard', dashboardFiles());

  app.use((req: Request, res: Response) => sendError(res, unknownUrl(req.method, req.path)));

  // Express's last resort: anything thrown outside a route still gets the spec's body, never a stack.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    sendError(res, error, deps.logger);
  });

  return app;
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export async function run<P>(
  route: Route<P>,
  params: Record<string, string>,
  principal: P,
  req: IncomingMessage,
  res: ServerResponse,
  deps: GatewayDeps,
) {
  const hasBody = route.method !== 'GET' && route.method !== 'DELETE';
  let endTurn: (() => void) | undefined;
  try {
    const files = route.body === 'json-or-multipart' ? (route.files ?? []) : undefined;
    const body = hasBody ? await readBody(req, res, bodyOwner(principal), files) : { value: {} };
    endTurn = body.endTurn;
    if (route.model) refuseModelNotAllowed(principal, body.value);
    const ctx: RouteContext<P> = {
      req,
      res,
      principal,
      params,
      query: queryOf(req.url ?? ''),
      body: body.value,
      services: deps.services,
      limits: deps.limits,
      // Trace context is added by the traced client when telemetry is on; nothing is allocated here.
      headers: NO_HEADERS,
    };
    const handled = route.handle(ctx);
    // The owner's next large body is parsed in a later turn of the event loop, other requests served between.
    if (endTurn) setImmediate(endTurn);
    endTurn = undefined;
    const reply = await handled;
    if (reply) sendReply(res, reply);
  } catch (error) {
    endTurn?.();
    if (res.headersSent) {
      deps.logger.error({ err: error, request_id: requestIdOf(res) }, 'failed after the response started');
      res.end();
      return;
    }
    sendError(res, error, deps.logger);
  }
}

/** The query string as Express's 'simple' parser read it: a repeated name gives an array. */
function queryOf(url: string): Record<string, unknown> {
  const { query } = splitUrl(url);
  return query === undefined ? {} : { ...parseQuery(query) };
}

const bodyOwner = (principal: unknown) =>
  typeof principal === 'object' && principal !== null && 'org_id' in principal ? String(principal.org_id) : 'operator';

function sendReply(res: ServerResponse, reply: Reply<unknown>) {
  if (reply.ok) sendJson(res, 200, reply.data);
  else sendError(res, new ApiError(reply.error));
}

/** A JSON answer as Express's `res.json` writes it (no ETag: see the app's settings). */
function sendJson(res: ServerResponse, status: number, body: unknown) {
  const json = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}

/** The one exit for failures: API errors, and anything unexpected (logged, never shown). */
export function sendError(res: ServerResponse, raw: unknown, logger?: Logger) {
  const error = toApiError(raw);
  if (error.status >= 500 && !(raw instanceof ApiError)) logger?.error({ err: raw, request_id: requestIdOf(res) }, 'unexpected error');
  if (error.retryAfter !== undefined) res.setHeader('Retry-After', String(error.retryAfter));
  sendJson(res, error.status, error.toBody());
}

/** Swagger UI's files, served from the package itself: the reference works with no network beyond the gateway. */
const SWAGGER_UI_FILES: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const REFERENCE_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>OC API reference</title>
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <main id="reference"></main>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

/** The interactive API reference at `/docs`: Swagger UI on `/openapi.json`, "Try it out" against this gateway. */
function apiReference() {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const router = express.Router();
  router.get('/', (_req, res) => {
    res.type('html').send(REFERENCE_PAGE);
  });
  router.get('/init.js', (_req, res) => {
    res.type('text/javascript').send("window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', deepLinking: true });\n");
  });
  router.get('/:file', (req, res, next) => {
    const type = SWAGGER_UI_FILES[req.params.file];
    if (!type) return next();
    // `root`, because under pnpm the package's own path holds `.pnpm`, a dot segment `send` would refuse.
    res.type(type).sendFile(req.params.file, { root: dir }, (err) => {
      if (err && !res.headersSent) next();
    });
  });
  return router;
}

export function setRateLimitHeaders(res: ServerResponse, state: RateLimitState) {
  res.setHeader('X-RateLimit-Limit', String(state.limit));
  res.setHeader('X-RateLimit-Remaining', String(state.remaining));
  res.setHeader('X-RateLimit-Reset', String(state.reset));
}

export const unknownUrl = (method: string, path: string) =>
  notFound('unknown_url', `Unrecognized request URL (${method}: ${path}).`);

/** The 404 for a path no route has, or the 405 (with its `Allow` header) for a method the path's routes do not take. */
export function refusal(res: ServerResponse, found: Exclude<Match<unknown>, { kind: 'found' }>, method: string, path: string): ApiError {
  return found.kind === 'not_found' ? unknownUrl(method, path) : methodNotAllowed(res, method, path, found.allow);
}

function methodNotAllowed(res: ServerResponse, method: string, path: string, allow: string[]) {
  res.setHeader('Allow', allow.join(', '));
  return new ApiError({
    status: 405,
    type: 'invalid_request_error',
    code: 'method_not_allowed',
    message: `Method ${method} is not allowed on ${path}; allowed: ${allow.join(', ')}.`,
  });
}

const serviceUnavailableBody = () => ({
  error: { type: 'service_unavailable_error', message: 'Not ready.', code: 'service_unavailable' },
});
