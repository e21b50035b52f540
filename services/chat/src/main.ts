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
import { createChat } from './app';
import { ChatConfigSchema, chatSettings } from './config';

/** The chat service as its own process over NATS; validated once at boot. */
const config = z
  .object({
    NATS_URL: z.string().default('nats://127.0.0.1:4222'),
    DATA_DIR: z.string().default('./.data/chat'),
    EVENTSTORE_URL: z.string().optional(),
    MONGO_URL: z.string().optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  })
  .extend(ChatConfigSchema.shape)
  .parse(process.env);

const telemetry = startTelemetry({ serviceName: 'oc-chat', version: pkg.version });
const logger = createLogger({ service: 'chat', level: config.LOG_LEVEL });
await mkdir(config.DATA_DIR, { recursive: true });
const stores = openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: join(config.DATA_DIR, 'events.sqlite') });
const readModels = config.MONGO_URL ? await MongoReadModelStore.connect(config.MONGO_URL, 'oc_chat') : new MemoryReadModelStore();
const client = new NatsServiceClient({ servers: config.NATS_URL });
const nc = await client.connection();
await ensureEventsStream(await jetstreamManager(nc));
const relay = await startOutboxRelay({ service: 'chat', eventStore: stores.store, checkpoints: stores.checkpoints, js: jetstream(nc) });

const chat = await createChat({
  eventStore: stores.store,
  readModels,
  client,
  clock: systemClock,
  ids: randomIds,
  logger,
  ...chatSettings(config),
});
const app = await NestFactory.createMicroservice(chat.module, {
  strategy: natsServerStrategy({ servers: config.NATS_URL, queue: 'chat' }),
  logger: false,
});
await app.listen();
logger.info('chat listening on NATS');

const shutdown = async () => {
  await app.close();
  await chat.close();
  await relay.stop();
  await client.close();
  await stores.close();
  await readModels.close();
  await telemetry.shutdown();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
