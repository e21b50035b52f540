import { configFromEnv, NatsPrefixSchema, systemClock } from '@oc/contracts';
import { NatsServiceClient } from '@oc/messaging';
import { createLogger, startTelemetry } from '@oc/telemetry';
import { Redis } from 'ioredis';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { RateLimits } from './application/rate-limits';
import { GatewayLimitsConfigSchema } from './config';
import { createGateway } from './gateway';
import { HttpServerConfigSchema } from './transport/http-server';

/** The gateway as its own process, reaching the services over NATS; validated once at boot. */
const config = configFromEnv(
  z.object({
    PORT: z.coerce.number().int().min(0).max(65_535).default(8080).describe('a TCP port, 0 to 65535'),
    HOST: z.string().default('0.0.0.0'),
    NATS_URL: z.string().default('nats://127.0.0.1:4222'),
    NATS_PREFIX: NatsPrefixSchema,
    ADMIN_TOKEN: z.string().min(16).describe('the operator token for /admin/v1, at least 16 characters'),
    REDIS_URL: z.string().url().optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    KEY_USAGE_FLUSH_MS: z.coerce.number().int().positive().default(10_000),
    ...HttpServerConfigSchema.shape,
    ...GatewayLimitsConfigSchema.shape,
  }),
);

const telemetry = await startTelemetry({ serviceName: 'oc-gateway', version: pkg.version });
const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
const services = new NatsServiceClient({ servers: config.NATS_URL, prefix: config.NATS_PREFIX });
const redis = config.REDIS_URL ? new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false }) : undefined;

const gateway = await createGateway({
  services,
  limits: redis ? RateLimits.redis(redis) : RateLimits.inMemory(),
  clock: systemClock,
  logger,
  adminToken: config.ADMIN_TOKEN,
  version: pkg.version,
  usageFlushMs: config.KEY_USAGE_FLUSH_MS,
  trustedProxies: config.TRUSTED_PROXIES,
  chatInFlightPerOrganization: config.CHAT_MAX_IN_FLIGHT_PER_ORG,
  authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
  consoleSecureCookie: config.CONSOLE_COOKIE_SECURE !== '0',
});
const server = await gateway.listen(config.PORT, config.HOST, config);
logger.info({ port: config.PORT }, 'gateway listening');

const shutdown = async () => {
  server.close();
  server.closeAllConnections();
  await gateway.close();
  await services.close();
  redis?.disconnect();
  await telemetry.shutdown();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
