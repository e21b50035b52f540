import 'reflect-metadata';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { natsNames, type OwningService, ownsStream } from '@oc/contracts';
import { type CheckpointStore, type EventStore, ensurePrivateDir, privateFiles, traceEventStore } from '@oc/eventstore';
import { openEventStores } from '@oc/eventstore/open';
import {
  ensureEventsStream,
  MessageTracingInterceptor,
  natsServerStrategy,
  NatsServiceClient,
  type ServiceClient,
  startOutboxRelay,
  traceServiceClient,
} from '@oc/messaging';
import { MongoReadModelStore, type ReadModelStore, SqliteReadModelStore } from '@oc/readmodel';
import { createLogger, type Logger, type Telemetry } from '@oc/telemetry';
import type { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ServiceProcessConfig } from './config';
import { serveProbes } from './health';

export { LogLevelSchema, serviceProcessConfig, type ServiceProcessConfig } from './config';

export interface ServiceInfrastructure {
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  readModels: ReadModelStore;
  client: ServiceClient;
  nc: NatsConnection;
  logger: Logger;
}

/** A readiness check that hangs (NATS reconnecting) counts as not ready. */
const within = <T>(ms: number, check: Promise<T>) =>
  Promise.race([check, sleep(ms, undefined, { ref: false }).then(() => Promise.reject(new Error(`no answer within ${ms} ms`)))]);

/**
 * Runs one service as its own process over NATS: its event store (EventStoreDB or SQLite), its read models
 * (MongoDB or SQLite), the outbox relay that publishes its own streams' events to JetStream, its Nest
 * microservice in the service's queue group, and its probes on HEALTH_PORT; SIGINT/SIGTERM close it all in
 * order. The service's `listening` runs once it answers requests: work that needs other services starts there.
 * `telemetry` was started by the process's first import; when it is on, requests, handlers, appends and
 * projection batches are traced.
 */
export async function runServiceProcess<S extends { module: DynamicModule; close(): Promise<void>; listening?(): void }>(options: {
  service: OwningService;
  version: string;
  config: ServiceProcessConfig;
  telemetry: Telemetry;
  create(infrastructure: ServiceInfrastructure): Promise<S>;
}): Promise<void> {
  const { service, config, telemetry } = options;
  const logger = createLogger({ service, level: config.LOG_LEVEL });
  privateFiles();
  await ensurePrivateDir(config.DATA_DIR);
  const stores = openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: config.EVENTSTORE_FILE ?? join(config.DATA_DIR, 'events.sqlite') });
  const readModels = config.MONGO_URL
    ? await MongoReadModelStore.connect(config.MONGO_URL, `oc_${service}`)
    : new SqliteReadModelStore({ filename: join(config.DATA_DIR, 'read-models.sqlite') });
  const nats = new NatsServiceClient({ servers: config.NATS_URL, prefix: config.NATS_PREFIX });
  const nc = await nats.connection();
  await ensureEventsStream(await jetstreamManager(nc), config.NATS_PREFIX);
  const relay = await startOutboxRelay({
    service,
    prefix: config.NATS_PREFIX,
    owns: ownsStream(service),
    eventStore: stores.store,
    checkpoints: stores.checkpoints,
    js: jetstream(nc),
  });

  const traced = telemetry.enabled;
  const instance = await options.create({
    eventStore: traced
      ? traceEventStore(stores.store, { system: config.EVENTSTORE_URL ? 'kurrentdb' : 'sqlite', projections: service })
      : stores.store,
    checkpoints: stores.checkpoints,
    readModels,
    client: traced ? traceServiceClient(nats, { system: 'nats', destination: natsNames(config.NATS_PREFIX).subject }) : nats,
    nc,
    logger,
  });
  const app = await NestFactory.createMicroservice(instance.module, {
    strategy: natsServerStrategy({ servers: config.NATS_URL, queue: service, prefix: config.NATS_PREFIX }),
    logger: false,
  });
  if (traced) app.useGlobalInterceptors(new MessageTracingInterceptor('nats'));
  await app.listen();
  instance.listening?.();
  const probes =
    config.HEALTH_PORT === undefined
      ? undefined
      : await serveProbes(config.HEALTH_PORT, config.HEALTH_HOST, () =>
          within(2_000, Promise.all([nats.ping(), stores.store.ping(), readModels.ping()])).then(() => undefined),
        );
  logger.info({ health_port: config.HEALTH_PORT }, `${service} listening on NATS`);

  const shutdown = async () => {
    probes?.close();
    await app.close();
    await instance.close();
    await relay.stop();
    await nats.close();
    await stores.close();
    await readModels.close();
    await telemetry.shutdown();
    process.exit(0);
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
