import 'reflect-metadata';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { randomIds, systemClock } from '@oc/contracts';
import { openEventStores } from '@oc/eventstore/open';
import { ensureEventsStream, JetStreamEventBus, natsServerStrategy, NatsServiceClient } from '@oc/messaging';
import { MemoryReadModelStore, MongoReadModelStore } from '@oc/readmodel';
import { createLogger, startTelemetry } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { createWebhook, VIDEO_EVENTS_CONSUMER } from './app';
import { WebhookConfigSchema, webhookSettings } from './config';

/**
 * The webhook service as its own process over NATS; validated once at boot. Production mode unless
 * WEBHOOK_MODE=development, and in production WEBHOOK_SECRET_KEY is required.
 */
const config = WebhookConfigSchema.extend({
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  DATA_DIR: z.string().default('./.data/webhook'),
  EVENTSTORE_URL: z.string().optional(),
  MONGO_URL: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  WEBHOOK_SECRET_KEY: z.string().min(1),
  /** The JetStream durable consumer; replicas of one deployment share it. */
  WEBHOOK_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default(VIDEO_EVENTS_CONSUMER),
}).parse(process.env);

const telemetry = startTelemetry({ serviceName: 'oc-webhook', version: pkg.version });
const logger = createLogger({ service: 'webhook', level: config.LOG_LEVEL });
await mkdir(config.DATA_DIR, { recursive: true });
const stores = openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: join(config.DATA_DIR, 'events.sqlite') });
const readModels = config.MONGO_URL ? await MongoReadModelStore.connect(config.MONGO_URL, 'oc_webhook') : new MemoryReadModelStore();
const client = new NatsServiceClient({ servers: config.NATS_URL });
const nc = await client.connection();
await ensureEventsStream(await jetstreamManager(nc));

const webhook = await createWebhook({
  eventStore: stores.store,
  readModels,
  bus: new JetStreamEventBus(nc),
  consumerName: config.WEBHOOK_CONSUMER,
  clock: systemClock,
  ids: randomIds,
  logger,
  settings: webhookSettings(config, 'production', config.WEBHOOK_SECRET_KEY),
  version: pkg.version,
});
const app = await NestFactory.createMicroservice(webhook.module, {
  strategy: natsServerStrategy({ servers: config.NATS_URL, queue: 'webhook' }),
  logger: false,
});
await app.listen();
logger.info('webhook listening on NATS');

const shutdown = async () => {
  await app.close();
  await webhook.close();
  await client.close();
  await stores.close();
  await readModels.close();
  await telemetry.shutdown();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
