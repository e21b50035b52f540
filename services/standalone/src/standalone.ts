import 'reflect-metadata';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createBilling } from '@oc/billing';
import { chatSettings, createChat } from '@oc/chat';
import {
  type Clock,
  type CreatedApiKey,
  type IdSource,
  type Organization,
  randomIds,
  SCOPES,
  Subjects,
  systemClock,
  unwrap,
} from '@oc/contracts';
import { ensurePrivateDir, openSqliteStores } from '@oc/eventstore';
import { createGateway, RateLimits } from '@oc/gateway';
import { EventStoreEventBus, InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger, type Logger } from '@oc/telemetry';
import { createVideo } from '@oc/video';
import { createWebhook, resolveSecretKey, webhookSettings } from '@oc/webhook';
import type { DynamicModule, INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { resolveAdminToken } from './admin-token';
import type { StandaloneConfig } from './config';
import { version } from './version';

export interface StandaloneOptions {
  config: StandaloneConfig;
  clock?: Clock;
  ids?: IdSource;
  logger?: Logger;
  /** Create the demo organization and key when the event store is empty (a first start). */
  demo?: boolean;
}

/**
 * Every service in one process over the in-process transport, with the embedded adapters: the SQLite
 * event store and each service's SQLite read models under DATA_DIR.
 */
export async function startStandalone(options: StandaloneOptions) {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? randomIds;
  const logger = options.logger ?? createLogger({ service: 'standalone', level: config.LOG_LEVEL });
  await ensurePrivateDir(config.DATA_DIR);
  const admin = await resolveAdminToken(config.DATA_DIR, config.ADMIN_TOKEN);

  const stores = openSqliteStores({ filename: join(config.DATA_DIR, 'events.sqlite'), clock });
  await mkdir(join(config.DATA_DIR, 'read-models'), { recursive: true });
  const readModelStores: Record<string, SqliteReadModelStore> = {};
  /** Each service keeps its read models in a file of its own, as it would in a database of its own. */
  const readModels = (service: string) =>
    (readModelStores[service] = new SqliteReadModelStore({ filename: join(config.DATA_DIR, 'read-models', `${service}.sqlite`) }));
  const broker = new InProcessBroker();
  const client = new InProcessServiceClient(broker);
  const services: { close(): Promise<void> }[] = [];
  const apps: INestMicroservice[] = [];
  /** Starts a service's Nest microservice on the in-process transport. */
  const serve = async <S extends { module: DynamicModule; close(): Promise<void>; listening?(): void }>(service: S) => {
    const app = await NestFactory.createMicroservice(service.module, {
      strategy: new InProcessServerStrategy(broker),
      logger: false,
    });
    await app.listen();
    apps.push(app);
    services.push(service);
    return service;
  };

  // Loaded only when configured, like every optional adapter: a standalone start should not pay for it.
  const redis = config.REDIS_URL
    ? new (await import('ioredis')).Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false })
    : undefined;
  const gateway = await createGateway({
    services: client,
    limits: redis ? RateLimits.redis(redis) : RateLimits.inMemory(),
    clock,
    logger: logger.child({ service: 'gateway' }),
    adminToken: admin.token,
    version,
    usageFlushMs: config.KEY_USAGE_FLUSH_MS,
    trustedProxies: config.TRUSTED_PROXIES,
    chatInFlightPerOrganization: config.CHAT_MAX_IN_FLIGHT_PER_ORG,
    authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
  });
  // The gateway listens first, so that by default video URLs point at the address it actually got; it is
  // ready once the services below answer its pings.
  const server = await gateway.listen(config.PORT, config.HOST, config);
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  const webhookKey = await resolveSecretKey(join(config.DATA_DIR, 'webhook-secret-key'), config.WEBHOOK_SECRET_KEY);
  // Built side by side: each catches its read models up on its own files and worker threads.
  const built = await Promise.all([
    createBilling({
      eventStore: stores.store,
      readModels: readModels('billing'),
      client,
      clock,
      ids,
      logger: logger.child({ service: 'billing' }),
    }),
    createChat({
      eventStore: stores.store,
      readModels: readModels('chat'),
      client,
      clock,
      ids,
      logger: logger.child({ service: 'chat' }),
      ...chatSettings(config),
    }),
    createVideo({
      eventStore: stores.store,
      readModels: readModels('video'),
      client,
      clock,
      ids,
      logger: logger.child({ service: 'video' }),
      config,
      publicBaseUrl: config.PUBLIC_BASE_URL ?? url,
      dataDir: join(config.DATA_DIR, 'video'),
    }),
    createWebhook({
      eventStore: stores.store,
      readModels: readModels('webhook'),
      // One shared log in this mode: the webhook service reads video events straight from it.
      bus: new EventStoreEventBus({ eventStores: { video: stores.store }, checkpoints: stores.checkpoints }),
      clock,
      ids,
      logger: logger.child({ service: 'webhook' }),
      settings: webhookSettings(config, 'development', webhookKey),
      version,
    }),
  ]);
  // In this order, so that closing (in reverse) stops billing's callers before billing.
  for (const service of built) await serve(service);
  for (const service of built) if ('listening' in service) service.listening();

  const demo = options.demo ? await createDemoOnFirstStart(client) : undefined;

  return {
    url,
    adminToken: admin.token,
    adminTokenGenerated: admin.generated,
    adminTokenFile: admin.file,
    demo,
    gateway,
    services: client,
    readModels: readModelStores,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await gateway.close();
      for (const app of apps.reverse()) await app.close();
      for (const service of services.reverse()) await service.close();
      await stores.close();
      for (const store of Object.values(readModelStores)) await store.close();
      redis?.disconnect();
    },
  };
}

export type Standalone = Awaited<ReturnType<typeof startStandalone>>;

async function createDemoOnFirstStart(client: InProcessServiceClient) {
  const existing = unwrap(await client.request<{ data: Organization[] }>(Subjects.billing.listOrganizations, { limit: 1 }));
  if (existing.data.length > 0) return undefined;
  const org = unwrap(await client.request<Organization>(Subjects.billing.createOrganization, { name: 'Demo', tier: 'standard' }));
  unwrap(
    await client.request(Subjects.billing.addCredits, {
      org_id: org.id,
      amount_micros: 10_000_000,
      description: 'Demo credit',
    }),
  );
  const key = unwrap(
    await client.request<CreatedApiKey>(Subjects.billing.createApiKey, {
      org_id: org.id,
      name: 'Demo key',
      scopes: [...SCOPES],
      mode: 'live',
    }),
  );
  return { organization: org, key: key.key };
}
