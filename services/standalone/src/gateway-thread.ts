import { readCatalogFile } from '@oc/routing';
import { telemetry } from './gateway-telemetry';
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { clockFromShared, modelsServed, type ShareableClock } from '@oc/contracts';
import { cookieSecure, createGateway, RateLimits, redisReady } from '@oc/gateway';
import { ThreadServiceClient, traceServiceClient } from '@oc/messaging';
import { createLogger } from '@oc/telemetry';
import type { StandaloneConfig } from './config';

/** What the standalone process gives its gateway thread. */
export interface GatewayThreadData {
  /** The services' end serves this port (`serveThreadClient`). */
  port: MessagePort;
  clock: ShareableClock;
  config: StandaloneConfig;
  adminToken: string;
  version: string;
  /** The process's `service.instance.id`, when the main thread exports telemetry: both threads are one instance. */
  serviceInstanceId: string | undefined;
}

/** What the thread tells the process, on its `parentPort`. */
export type GatewayThreadEvent = { kind: 'listening'; port: number } | { kind: 'failed'; message: string } | { kind: 'drained' } | { kind: 'closed' };

/** What the process tells the thread: drain (see `Gateway.drain`), then close. */
export type GatewayThreadCommand = { kind: 'drain'; graceMs: number } | { kind: 'close' };

/**
 * The gateway of the standalone process, in a thread of its own: HTTP, keys, limits and validation run beside
 * the services rather than between them on one event loop, so the process uses a second core. It reaches the
 * services through a port, as the distributed gateway reaches them through NATS.
 */
async function run(data: GatewayThreadData) {
  const { config } = data;
  const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
  const thread = new ThreadServiceClient(data.port);
  const services = telemetry.enabled ? traceServiceClient(thread, { system: 'thread' }) : thread;
  const redis = config.REDIS_URL
    ? new (await import('ioredis')).Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false })
    : undefined;
  if (redis && !(await redisReady(redis))) logger.warn('Redis is not reachable yet: until it is, this gateway counts rate limits in its own memory');
  const gateway = await createGateway({
    services,
    limits: redis ? RateLimits.redis(redis, config.REDIS_KEY_PREFIX) : RateLimits.inMemory(),
    clock: clockFromShared(data.clock),
    logger,
    adminToken: data.adminToken,
    version: data.version,
    usageFlushMs: config.KEY_USAGE_FLUSH_MS,
    trustedProxies: config.TRUSTED_PROXIES,
    chatInFlightPerOrganization: config.CHAT_MAX_IN_FLIGHT_PER_ORG,
    authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
    consoleSecureCookie: cookieSecure(config.CONSOLE_COOKIE_SECURE),
    models: modelsServed(config.MODELS_FILE ? readCatalogFile(config.MODELS_FILE) : undefined),
  });
  const server = await gateway.listen(config.PORT, config.HOST, config);
  const tell = (event: GatewayThreadEvent) => parentPort!.postMessage(event);
  parentPort!.on('message', async (message: GatewayThreadCommand) => {
    if (message.kind === 'drain') {
      await gateway.drain(message.graceMs);
      return tell({ kind: 'drained' });
    }
    await new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await gateway.close();
    await services.close();
    redis?.disconnect();
    await telemetry.shutdown();
    tell({ kind: 'closed' });
    parentPort!.close();
  });
  tell({ kind: 'listening', port: (server.address() as AddressInfo).port });
}

run(workerData as GatewayThreadData).catch((error: unknown) => {
  parentPort!.postMessage({ kind: 'failed', message: error instanceof Error ? error.message : String(error) } satisfies GatewayThreadEvent);
});
