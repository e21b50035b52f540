import 'reflect-metadata';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { natsNames, type OwningService, ownsStream, type Replicas } from '@oc/contracts';
import {
  type CheckpointStore,
  EXIT_CORRUPT_LOG,
  EventLogCorruptError,
  type EventStore,
  ensurePrivateDir,
  privateFiles,
  openSnapshotStore,
  type SnapshotStore,
  traceEventStore,
} from '@oc/eventstore';
import { openEventStores } from '@oc/eventstore/open';
import {
  ensureEventsStream,
  jetStreamLeaseStore,
  MessageTracingInterceptor,
  natsPresence,
  natsServerStrategy,
  NatsServiceClient,
  ReplicaNameInUseError,
  runLeased,
  type ServiceClient,
  startOutboxRelay,
  traceServiceClient,
} from '@oc/messaging';
import {
  MongoReadModelStore,
  type ProjectionWishes,
  type ProjectorFactory,
  type ReadModelStore,
  sharedProjection,
  SqliteReadModelStore,
} from '@oc/readmodel';
import { createLogger, type Logger, type Telemetry } from '@oc/telemetry';
import type { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ServiceProcessConfig } from './config';
import { serveProbes } from './health';

export { LogLevelSchema, serviceProcessConfig, type ServiceProcessConfig } from './config';

export interface ServiceInfrastructure {
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  /** Kept states of long streams (`DATA_DIR/snapshots.sqlite`, a cache beside any event store). */
  snapshots: SnapshotStore;
  /** The service's read models, which every replica reads; written only by the one that projects. */
  readModels: ReadModelStore;
  /** Projects the service's read models on one replica at a time, the holder of the lease `projector.<service>`. */
  projector: ProjectorFactory;
  client: ServiceClient;
  nc: NatsConnection;
  logger: Logger;
  /** This replica's name, and whether another replica is gone (NATS presence). */
  replicas: Replicas;
}

/**
 * What was cut at the end of a stop's grace still settles its charge and answers (a round trip to billing or two);
 * the requests taken are waited for this much beyond the grace.
 */
const SETTLE_AFTER_GRACE_MS = 5_000;

/** Positions queries wait for, told to the replica that projects over core NATS (lost when nobody listens: it catches up anyway). */
function natsWishes(nc: NatsConnection, subject: string): ProjectionWishes {
  return {
    tell: (position) => nc.publish(subject, String(position)),
    hear(listener) {
      const subscription = nc.subscribe(subject, {
        callback: (error, message) => {
          if (!error) listener(Number(message.string()));
        },
      });
      return { close: () => subscription.unsubscribe() };
    },
  };
}

/** A readiness check that hangs (NATS reconnecting) counts as not ready. */
const within = <T>(ms: number, check: Promise<T>) =>
  Promise.race([check, sleep(ms, undefined, { ref: false }).then(() => Promise.reject(new Error(`no answer within ${ms} ms`)))]);

/**
 * Runs one service as its own process over NATS: its event store (EventStoreDB or SQLite), its read models
 * (MongoDB or SQLite), the outbox relay that publishes its own streams' events to JetStream, its Nest
 * microservice in the service's queue group, and its probes on HEALTH_PORT. On SIGINT or SIGTERM it is not ready
 * any more and takes no new requests; those it took are answered, and the service's own work in flight (`drain`)
 * may finish, within SHUTDOWN_GRACE_MS; then it closes it all in order. The service's `listening` runs once it
 * answers requests: work that needs other services starts there.
 * `telemetry` was started by the process's first import; when it is on, requests, handlers, appends and
 * projection batches are traced.
 */
/** The event log opened, or the process stopped with one line saying it is corrupt (never a stack trace). */
function openLog<T>(open: () => T): T {
  try {
    return open();
  } catch (error) {
    if (!(error instanceof EventLogCorruptError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(EXIT_CORRUPT_LOG);
  }
}

export async function runServiceProcess<
  S extends { module: DynamicModule; close(): Promise<void>; listening?(): void; drain?(graceMs: number): Promise<void> },
>(options: {
  service: OwningService;
  version: string;
  config: ServiceProcessConfig;
  /** The replica's name when the service has a variable of its own for it (CHAT_REPLICA_ID). */
  replicaId?: string | undefined;
  telemetry: Telemetry;
  create(infrastructure: ServiceInfrastructure): Promise<S>;
}): Promise<void> {
  const { service, config, telemetry } = options;
  const logger = createLogger({ service, level: config.LOG_LEVEL });
  privateFiles();
  await ensurePrivateDir(config.DATA_DIR);
  const stores = openLog(() => openEventStores({ eventStoreUrl: config.EVENTSTORE_URL, sqliteFile: config.EVENTSTORE_FILE ?? join(config.DATA_DIR, 'events.sqlite') }));
  const snapshots = openSnapshotStore(config.DATA_DIR, logger);
  const readModelFile = config.READMODEL_FILE ?? join(config.DATA_DIR, 'read-models.sqlite');
  const onRebuilt = (message: string) => logger.warn(message);
  // Queries only: the replica holding the projector lease writes, through a store of its own (`projector`).
  const readModels = config.MONGO_URL
    ? await MongoReadModelStore.connect(config.MONGO_URL, `oc_${service}`)
    : new SqliteReadModelStore({ filename: readModelFile, writes: 'none', onRebuilt });
  const nats = new NatsServiceClient({ servers: config.NATS_URL, prefix: config.NATS_PREFIX });
  const nc = await nats.connection();
  const self = options.replicaId ?? config.REPLICA_ID ?? hostname();
  const replicas = await natsPresence(nc, { service, self, prefix: config.NATS_PREFIX }).catch((error: unknown) => {
    if (!(error instanceof ReplicaNameInUseError)) throw error;
    // A configuration problem like any other: two processes under one name would settle each other's work.
    process.stderr.write(`Invalid configuration: REPLICA_ID: ${error.message}\n`);
    process.exit(78);
  });
  await ensureEventsStream(await jetstreamManager(nc), config.NATS_PREFIX, config.NATS_STREAM_REPLICAS);
  const leases = await jetStreamLeaseStore(nc, { prefix: config.NATS_PREFIX, replicas: config.NATS_STREAM_REPLICAS });
  // One replica publishes the service's events: the others' copies would only be dropped by JetStream as duplicates.
  const relay = runLeased({
    leases,
    key: `relay.${service}`,
    replicas,
    start: () =>
      startOutboxRelay({
        service,
        prefix: config.NATS_PREFIX,
        owns: ownsStream(service),
        eventStore: stores.store,
        checkpoints: stores.checkpoints,
        js: jetstream(nc),
      }),
    onHeld: (held) => logger.info({ replica: self }, held ? 'outbox relay: this replica publishes' : 'outbox relay: this replica stopped publishing'),
    onError: (error) => logger.warn({ err: error }, 'outbox relay lease'),
  });
  // One replica projects the service's read models into the store they all read: every replica doing it was
  // most of the CPU a request cost with two replicas (issue 29).
  const projector = sharedProjection({
    lease: (start) =>
      runLeased({
        leases,
        key: `projector.${service}`,
        replicas,
        start,
        onHeld: (held) => logger.info({ replica: self }, held ? 'projector: this replica projects' : 'projector: this replica stopped projecting'),
        onError: (error) => logger.warn({ err: error }, 'projector lease'),
      }),
    wishes: natsWishes(nc, natsNames(config.NATS_PREFIX).projectionWanted(service)),
    openWriter: () => {
      // MongoDB: the same database, written through the same client, which the process closes itself.
      if (!config.MONGO_URL) {
        const store = new SqliteReadModelStore({ filename: readModelFile, onRebuilt });
        return { store, close: () => store.close() };
      }
      return { store: readModels, close: async () => {} };
    },
    pollMs: config.MONGO_URL ? 10 : 2,
  });

  const traced = telemetry.enabled;
  const instance = await options.create({
    eventStore: traced
      ? traceEventStore(stores.store, { system: config.EVENTSTORE_URL ? 'kurrentdb' : 'sqlite', projections: service })
      : stores.store,
    checkpoints: stores.checkpoints,
    snapshots,
    readModels,
    projector,
    client: traced ? traceServiceClient(nats, { system: 'nats', destination: natsNames(config.NATS_PREFIX).subject }) : nats,
    nc,
    logger,
    replicas,
  });
  // Billing's account commands reach the replica owning the organization's partition (docs/scaling.md).
  const strategy = natsServerStrategy({ servers: config.NATS_URL, queue: service, prefix: config.NATS_PREFIX, owner: { service, self } });
  const app = await NestFactory.createMicroservice(instance.module, { strategy, logger: false });
  if (traced) app.useGlobalInterceptors(new MessageTracingInterceptor('nats'));
  await app.listen();
  instance.listening?.();
  let stopping: Promise<void> | undefined;
  const probes =
    config.HEALTH_PORT === undefined
      ? undefined
      : await serveProbes(config.HEALTH_PORT, config.HEALTH_HOST, () =>
          stopping
            ? Promise.reject(new Error('stopping'))
            : within(2_000, Promise.all([nats.ping(), stores.store.ping(), readModels.ping()])).then(() => undefined),
        );
  logger.info({ health_port: config.HEALTH_PORT, replica: self }, `${service} listening on NATS`);

  const stop = async () => {
    const grace = config.SHUTDOWN_GRACE_MS;
    await Promise.all([strategy.drain(grace + SETTLE_AFTER_GRACE_MS), instance.drain?.(grace)]);
    probes?.close();
    await app.close();
    await instance.close();
    await relay.stop();
    await replicas.stop();
    await nats.close();
    await stores.close();
    snapshots.close();
    await readModels.close();
    await telemetry.shutdown();
    process.exit(0);
  };
  // One stop, whichever signal comes first; the same signal again ends the process at once, as by default.
  const shutdown = () => void (stopping ??= stop());
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
