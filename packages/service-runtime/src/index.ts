import 'reflect-metadata';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { NatsPrefixSchema, type OwningService, ownsStream, type Replicas } from '@oc/contracts';
import { type CheckpointStore, type EventStore, ensurePrivateDir, privateFiles } from '@oc/eventstore';
import { openEventStores } from '@oc/eventstore/open';
import { ensureEventsStream, natsPresence, natsServerStrategy, NatsServiceClient, ReplicaNameInUseError, startOutboxRelay } from '@oc/messaging';
import { MongoReadModelStore, type ReadModelStore, SqliteReadModelStore } from '@oc/readmodel';
import { createLogger, type Logger, startTelemetry } from '@oc/telemetry';
import type { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { z } from 'zod';

/** The settings every service process shares; each service extends them with its own. */
export const serviceProcessConfig = (service: OwningService) =>
  z.object({
    NATS_URL: z.string().default('nats://127.0.0.1:4222'),
    NATS_PREFIX: NatsPrefixSchema,
    DATA_DIR: z.string().default(`./.data/${service}`),
    EVENTSTORE_URL: z.string().optional(),
    /**
     * The SQLite event store when EVENTSTORE_URL is unset; `$DATA_DIR/events.sqlite` by default. Processes on
     * one machine may share one file, as services share one EventStoreDB in production.
     */
    EVENTSTORE_FILE: z.string().min(1).optional(),
    MONGO_URL: z.string().optional(),
    /**
     * The SQLite read models when MONGO_URL is unset; `$DATA_DIR/read-models.sqlite` by default. Each replica
     * projects the shared log into a file of its own.
     */
    READMODEL_FILE: z.string().min(1).optional(),
    /** This replica's name among the service's running replicas; the host name by default. */
    REPLICA_ID: z.string().min(1).max(200).optional().describe('a name no other running replica of the service uses'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  });
export type ServiceProcessConfig = z.infer<ReturnType<typeof serviceProcessConfig>>;

export interface ServiceInfrastructure {
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  readModels: ReadModelStore;
  client: NatsServiceClient;
  nc: NatsConnection;
  logger: Logger;
  /** This replica's name, and whether another replica is gone (NATS presence). */
  replicas: Replicas;
}

/**
 * Runs one service as its own process over NATS: telemetry, its event store (EventStoreDB or SQLite),
 * its read models (MongoDB or SQLite), the outbox relay that publishes its own streams' events to JetStream,
 * and its Nest microservice in the service's queue group; SIGINT/SIGTERM close it all in order. The
 * service's `listening` runs once it answers requests: work that needs other services starts there.
 */
export async function runServiceProcess<S extends { module: DynamicModule; close(): Promise<void>; listening?(): void }>(options: {
  service: OwningService;
  version: string;
  config: ServiceProcessConfig;
  /** The replica's name when the service has a variable of its own for it (CHAT_REPLICA_ID). */
  replicaId?: string | undefined;
  create(infrastructure: ServiceInfrastructure): Promise<S>;
}): Promise<void> {
  const { service, config } = options;
  const telemetry = await startTelemetry({ serviceName: `oc-${service}`, version: options.version });
  const logger = createLogger({ service, level: config.LOG_LEVEL });
  privateFiles();
  await ensurePrivateDir(config.DATA_DIR);
  const stores = openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: config.EVENTSTORE_FILE ?? join(config.DATA_DIR, 'events.sqlite') });
  const readModels = config.MONGO_URL
    ? await MongoReadModelStore.connect(config.MONGO_URL, `oc_${service}`)
    : new SqliteReadModelStore({ filename: config.READMODEL_FILE ?? join(config.DATA_DIR, 'read-models.sqlite') });
  const client = new NatsServiceClient({ servers: config.NATS_URL, prefix: config.NATS_PREFIX });
  const nc = await client.connection();
  const self = options.replicaId ?? config.REPLICA_ID ?? hostname();
  const replicas = await natsPresence(nc, { service, self, prefix: config.NATS_PREFIX }).catch((error: unknown) => {
    if (!(error instanceof ReplicaNameInUseError)) throw error;
    // A configuration problem like any other: two processes under one name would settle each other's work.
    process.stderr.write(`Invalid configuration: REPLICA_ID: ${error.message}\n`);
    process.exit(78);
  });
  await ensureEventsStream(await jetstreamManager(nc), config.NATS_PREFIX);
  const relay = await startOutboxRelay({
    service,
    prefix: config.NATS_PREFIX,
    owns: ownsStream(service),
    eventStore: stores.store,
    checkpoints: stores.checkpoints,
    js: jetstream(nc),
  });

  const instance = await options.create({
    eventStore: stores.store,
    checkpoints: stores.checkpoints,
    readModels,
    client,
    nc,
    logger,
    replicas,
  });
  const app = await NestFactory.createMicroservice(instance.module, {
    strategy: natsServerStrategy({ servers: config.NATS_URL, queue: service, prefix: config.NATS_PREFIX }),
    logger: false,
  });
  await app.listen();
  instance.listening?.();
  logger.info({ replica: self }, `${service} listening on NATS`);

  const shutdown = async () => {
    await app.close();
    await instance.close();
    await replicas.stop();
    await relay.stop();
    await client.close();
    await stores.close();
    await readModels.close();
    await telemetry.shutdown();
    process.exit(0);
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
