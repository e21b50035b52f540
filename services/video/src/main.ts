import 'reflect-metadata';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { randomIds, systemClock } from '@oc/contracts';
import { openEventStores } from '@oc/eventstore/open';
import { ensureEventsStream, natsServerStrategy, NatsServiceClient, startOutboxRelay } from '@oc/messaging';
import { MemoryReadModelStore, MongoReadModelStore } from '@oc/readmodel';
import { createLogger, startTelemetry } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { createVideo } from './app';
import { VideoConfigSchema } from './config';

/** The video service as its own process over NATS; validated once at boot. */
const config = VideoConfigSchema.extend({
  NATS_URL: z.string().default('nats://127.0.0.1:4222'),
  DATA_DIR: z.string().default('./.data/video'),
  EVENTSTORE_URL: z.string().optional(),
  MONGO_URL: z.string().optional(),
  PUBLIC_BASE_URL: z.url().default('http://localhost:8080'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
}).parse(process.env);

const telemetry = startTelemetry({ serviceName: 'oc-video', version: pkg.version });
const logger = createLogger({ service: 'video', level: config.LOG_LEVEL });
await mkdir(config.DATA_DIR, { recursive: true });
const stores = openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: join(config.DATA_DIR, 'events.sqlite') });
const readModels = config.MONGO_URL ? await MongoReadModelStore.connect(config.MONGO_URL, 'oc_video') : new MemoryReadModelStore();
const client = new NatsServiceClient({ servers: config.NATS_URL });
const nc = await client.connection();
await ensureEventsStream(await jetstreamManager(nc));
const relay = await startOutboxRelay({ service: 'video', eventStore: stores.store, checkpoints: stores.checkpoints, js: jetstream(nc) });

const video = await createVideo({
  eventStore: stores.store,
  readModels,
  client,
  clock: systemClock,
  ids: randomIds,
  logger,
  config,
  publicBaseUrl: config.PUBLIC_BASE_URL,
  dataDir: config.DATA_DIR,
});
const app = await NestFactory.createMicroservice(video.module, {
  strategy: natsServerStrategy({ servers: config.NATS_URL, queue: 'video' }),
  logger: false,
});
await app.listen();
logger.info('video listening on NATS');

const shutdown = async () => {
  await app.close();
  await video.close();
  await relay.stop();
  await client.close();
  await stores.close();
  await readModels.close();
  await telemetry.shutdown();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
