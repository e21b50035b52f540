import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ApiError, type ConsolePrincipal, rateLimited } from '@oc/contracts';
import { setHttpRoute } from '@oc/telemetry';
import express, { type Request, type Response } from 'express';
import type { ConsoleSessions } from '../application/console-sessions';
import { consoleSessionWindow } from '../domain/limits';
import type { ConsoleAudience, ConsoleRoute } from './console-routes';
import { type GatewayDeps, refusal, run, sendError, setRateLimitHeaders, unknownUrl } from './http';
import { compile, match } from './routes';

const SAFE_METHODS = new Set(['GET', 'HEAD']);

const wrongAudience = (who: ConsoleAudience) =>
  new ApiError({
    status: 403,
    type: 'permission_error',
    code: who === 'operator' ? 'operator_session_required' : 'member_session_required',
    message:
      who === 'operator'
        ? 'This operation is for operators: sign in with the admin token.'
        : "This operation acts on an organization's data: sign in as one of its members.",
  });

/**
 * A request whose `Origin` names another site is refused whatever it carries (a second line behind SameSite and
 * CSRF). `Origin: null` is refused too: it is what a sandboxed frame, a `data:` or `file:` page, or a cross-site
 * redirect sends, never the console's own page (served with `Referrer-Policy: same-origin`, under which a
 * browser names the page's origin on its changes).
 */
function checkOrigin(req: Request) {
  const origin = req.headers.origin;
  if (origin === undefined || SAFE_METHODS.has(req.method)) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    host = '';
  }
  if (host !== req.headers.host) {
    throw new ApiError({ status: 403, type: 'permission_error', code: 'cross_origin_request', message: 'Cross-origin requests to the console API are refused.' });
  }
}

/**
 * `/console/v1`: a session cookie instead of a key, a CSRF token on every change, a window of requests per
 * session, then the same route runner `/v1` and `/admin/v1` use (same handlers, same error bodies).
 */
export function consoleApi(deps: GatewayDeps, routes: ConsoleRoute[], sessions: ConsoleSessions) {
  const compiled = compile(routes);
  return async (req: Request, res: Response) => {
    const path = `/console/v1${req.path}`;
    try {
      const found = match(compiled, req.method, path);
      if (found.kind !== 'found') return sendError(res, refusal(res, found, req.method, path));
      setHttpRoute(found.route.path);
      const route = found.route as ConsoleRoute;
      checkOrigin(req);
      if (route.who === 'anyone') return await run<ConsolePrincipal | null>(route as never, found.params, null, req, res, deps);
      const principal = await sessions.authenticate(req);
      const outcome = await deps.limits.consume([consoleSessionWindow(principal.session_id)]);
      setRateLimitHeaders(res, outcome.headers);
      if (!outcome.allowed) return sendError(res, rateLimited(outcome.retryAfterSeconds, 'console requests per minute'));
      if (!SAFE_METHODS.has(req.method)) sessions.checkCsrf(req);
      if ((route.who === 'member' || route.who === 'operator') && principal.kind !== route.who) return sendError(res, wrongAudience(route.who));
      await run(route, found.params, principal, req, res, deps);
    } catch (error) {
      sendError(res, error, deps.logger);
    }
  };
}

/** Where the built console is: `dist/` of the `@oc/dashboard` package (built by `pnpm install`). */
export function dashboardDir(): string | undefined {
  try {
    const dir = join(dirname(createRequire(import.meta.url).resolve('@oc/dashboard/package.json')), 'dist');
    return existsSync(join(dir, 'index.html')) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** The page may load only its own files and talk only to this gateway. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "media-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The web console at `/dashboard`: the built single-page app, its hashed assets cached for good, every other
 * path answered with its page (the app routes in the browser).
 */
export function dashboardFiles(dir = dashboardDir()) {
  const router = express.Router({ strict: true });
  router.use((req, res, next) => {
    res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    res.setHeader('X-Frame-Options', 'DENY');
    // Not `no-referrer`: under it a browser sends `Origin: null` on the page's own changes, which checkOrigin refuses.
    res.setHeader('Referrer-Policy', 'same-origin');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return sendError(res, new ApiError({ status: 405, type: 'invalid_request_error', code: 'method_not_allowed', message: `Method ${req.method} is not allowed on /dashboard.` }));
    }
    if (!dir) {
      res.status(503).type('text/plain').send('The console is not built: run `npx -y pnpm@9.15.9 build` (pnpm install does it).\n');
      return;
    }
    // `/dashboard` itself: relative asset URLs need the trailing slash.
    if (req.originalUrl === '/dashboard' || req.originalUrl.startsWith('/dashboard?')) return res.redirect(301, '/dashboard/');
    next();
  });
  if (!dir) return router;
  router.use(
    '/assets',
    express.static(join(dir, 'assets'), {
      index: false,
      etag: false,
      setHeaders: (res) => res.setHeader('Cache-Control', 'public, max-age=31536000, immutable'),
    }),
    (req: Request, res: Response) => sendError(res, unknownUrl(req.method, req.originalUrl)),
  );
  router.use(express.static(dir, { index: false, etag: false, setHeaders: (res) => res.setHeader('Cache-Control', 'no-cache') }));
  router.use((_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile('index.html', { root: dir });
  });
  return router;
}
