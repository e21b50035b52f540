import type { Server } from 'node:http';
import { type Clock, type Model, Subjects, unwrap } from '@oc/contracts';
import type { ReplicaWatch, ServiceClient } from '@oc/messaging';
import type { Logger } from 'pino';
import { KeyAuthenticator } from './application/authenticator';
import { ConsoleSessions } from './application/console-sessions';
import { KeyUsageRecorder } from './application/key-usage';
import { PasswordHasher, type PasswordSettings } from './application/passwords';
import type { RateLimits } from './application/rate-limits';
import { createGatewayApp } from './transport/http';
import { type HttpServerConfig, HttpServerConfigSchema, listenHttp } from './transport/http-server';
import { adminRoutes } from './transport/admin-routes';
import { Drain } from './transport/drain';
import { consoleRoutes } from './transport/console-routes';
import { v1Routes } from './transport/v1-routes';

export interface GatewayOptions {
  services: ServiceClient;
  limits: RateLimits;
  clock: Clock;
  logger: Logger;
  adminToken: string;
  version: string;
  /** How often key usage is reported to billing. */
  usageFlushMs?: number;
  /** Load balancers whose `X-Forwarded-For` is believed (see `TRUSTED_PROXIES`). */
  trustedProxies?: string[];
  /** See `CHAT_MAX_IN_FLIGHT_PER_ORG`. */
  chatInFlightPerOrganization?: number;
  /** See `AUTH_FAILURES_PER_MINUTE`. */
  authFailuresPerMinute?: number;
  /** `Secure` on the console's session cookie always or never (`CONSOLE_COOKIE_SECURE`); unset, per request (`secureCookieFor`). */
  consoleSecureCookie?: boolean;
  /** scrypt's cost for members' passwords; tests may lower it. */
  passwordSettings?: PasswordSettings;
  /** What GET /v1/models lists: the spec's models by default, the catalog's too when there is one. */
  models?: readonly Model[];
  /** Where chat replicas answer presence (over NATS): a completion whose replica dies is failed at once. */
  replicas?: ReplicaWatch;
}

/** The gateway's composition: routes, key cache kept fresh by billing's broadcasts, usage reporting. */
export async function createGateway(options: GatewayOptions) {
  const { services, clock, logger } = options;
  const authenticator = new KeyAuthenticator(services, clock);
  const usage = new KeyUsageRecorder(services, clock);
  const subscriptions = await Promise.all([
    services.onBroadcast(Subjects.broadcast.apiKeyRevoked, (m) => authenticator.forgetKey((m as { key_hash: string }).key_hash)),
    services.onBroadcast(Subjects.broadcast.organizationChanged, (m) =>
      authenticator.forgetOrganization((m as { org_id: string }).org_id),
    ),
  ]);
  const flushUsage = () => usage.flush().catch((err: unknown) => logger.warn({ err }, 'key usage not reported yet'));
  const closing = new AbortController();
  const drain = new Drain();
  const timer = setInterval(flushUsage, options.usageFlushMs ?? 10_000);
  timer.unref();

  const passwords = new PasswordHasher(options.passwordSettings);
  const chat = { maxInFlightPerOrganization: options.chatInFlightPerOrganization, replicas: options.replicas, cut: drain.cut.signal };
  const v1 = v1Routes(options.version, () => clock.now(), chat, { closing: closing.signal }, options.models);
  const admin = adminRoutes(passwords);
  const sessions = new ConsoleSessions({
    services,
    clock,
    limits: options.limits,
    hasher: passwords,
    adminToken: options.adminToken,
    ...(options.consoleSecureCookie === undefined ? {} : { secureCookie: options.consoleSecureCookie }),
  });
  const app = createGatewayApp({
    services,
    authenticator,
    limits: options.limits,
    usage,
    clock,
    logger,
    adminToken: options.adminToken,
    version: options.version,
    v1,
    admin,
    console: { routes: consoleRoutes(v1, admin, sessions), sessions },
    trustedProxies: options.trustedProxies,
    anonymousPerMinute: options.authFailuresPerMinute,
    ready: async () => {
      if (drain.draining) throw new Error('shutting down');
      await services.ping();
      unwrap(await services.request(Subjects.billing.ping, {}, { timeoutMs: 2_000 }));
      unwrap(await services.request(Subjects.chat.ping, {}, { timeoutMs: 2_000 }));
      unwrap(await services.request(Subjects.video.ping, {}, { timeoutMs: 2_000 }));
    },
  });

  return {
    app,
    authenticator,
    usage,
    async listen(port: number, host = '0.0.0.0', limits: HttpServerConfig = HttpServerConfigSchema.parse({})): Promise<Server> {
      const server = await listenHttp(drain.listener(app), port, host, limits, options.trustedProxies);
      // Closing the server waits for the requests in flight, and an event stream is one until its client leaves:
      // the streams are ended first (each is told to reconnect), whoever closes the server.
      const close = server.close.bind(server);
      server.close = ((callback?: (err?: Error) => void) => {
        closing.abort();
        return close(callback);
      }) as Server['close'];
      return server;
    },
    /**
     * A stop's first part: not ready, and new requests refused, from now on; event streams are ended (each told to
     * reconnect, which it does to another gateway); the requests in flight may finish for `graceMs`, then the chat
     * completions still running are given up (a stream ends with an error event). Resolves once none is left.
     */
    async drain(graceMs: number) {
      const drained = drain.drain(graceMs);
      closing.abort();
      await drained;
    },
    async close() {
      closing.abort();
      clearInterval(timer);
      await flushUsage();
      await Promise.all(subscriptions.map((s) => s.stop()));
    },
  };
}

export type Gateway = Awaited<ReturnType<typeof createGateway>>;
