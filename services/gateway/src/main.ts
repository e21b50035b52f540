import { telemetry } from './telemetry';
import { configFromEnv, modelsServed, natsNames, systemClock } from '@oc/contracts';
import { NatsServiceClient, traceServiceClient, watchReplicas } from '@oc/messaging';
import { readCatalogFile } from '@oc/routing';
import { createLogger } from '@oc/telemetry';
import { Redis } from 'ioredis';
import pkg from '../package.json' with { type: 'json' };
import { RateLimits, redisReady } from './application/rate-limits';
import { cookieSecure } from './config';
import { createGateway } from './gateway';
import { gatewayProcessConfig } from './process-config';

/** The gateway as its own process, reaching the services over NATS; validated once at boot. */
const config = configFromEnv(gatewayProcessConfig);

const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
const nats = new NatsServiceClient({ servers: config.NATS_URL, prefix: config.NATS_PREFIX });
const services = telemetry.enabled ? traceServiceClient(nats, { system: 'nats', destination: natsNames(config.NATS_PREFIX).subject }) : nats;
// A completion whose chat replica dies is failed within about a second, instead of waiting out its timeouts.
const replicas = watchReplicas(() => nats.connection(), { prefix: config.NATS_PREFIX });
const redis = config.REDIS_URL ? new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false }) : undefined;
if (redis && !(await redisReady(redis))) logger.warn('Redis is not reachable yet: until it is, this gateway counts rate limits in its own memory');

const gateway = await createGateway({
  services,
  limits: redis ? RateLimits.redis(redis, config.REDIS_KEY_PREFIX) : RateLimits.inMemory(),
  clock: systemClock,
  logger,
  adminToken: config.ADMIN_TOKEN,
  version: pkg.version,
  usageFlushMs: config.KEY_USAGE_FLUSH_MS,
  trustedProxies: config.TRUSTED_PROXIES,
  chatInFlightPerOrganization: config.CHAT_MAX_IN_FLIGHT_PER_ORG,
  authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
  consoleSecureCookie: cookieSecure(config.CONSOLE_COOKIE_SECURE),
  models: modelsServed(config.MODELS_FILE ? readCatalogFile(config.MODELS_FILE) : undefined),
  replicas,
});
const server = await gateway.listen(config.PORT, config.HOST, config);
logger.info({ port: config.PORT }, 'gateway listening');

let stopping: Promise<void> | undefined;
const stop = async () => {
  await gateway.drain(config.SHUTDOWN_GRACE_MS);
  server.close();
  server.closeAllConnections();
  await gateway.close();
  replicas.stop();
  await services.close();
  redis?.disconnect();
  await telemetry.shutdown();
  process.exit(0);
};
// One stop, whichever signal comes first; the same signal again ends the process at once, as by default.
const shutdown = () => void (stopping ??= stop());
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
