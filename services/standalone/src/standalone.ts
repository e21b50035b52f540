import 'reflect-metadata';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { createBilling, paymentSettings } from '@oc/billing';
import { chatSettings, createChat } from '@oc/chat';
import {
  type Clock,
  type CreatedApiKey,
  type IdSource,
  type Organization,
  sortableIds,
  SCOPES,
  shareClock,
  Subjects,
  systemClock,
  unwrap,
} from '@oc/contracts';
import { ensurePrivateDir, openSnapshotStore, openSqliteStores, startThread, traceEventStore } from '@oc/eventstore';
import {
  EventStoreEventBus,
  InProcessBroker,
  InProcessServerStrategy,
  InProcessServiceClient,
  MessageTracingInterceptor,
  serveThreadClient,
  type ServiceClient,
  traceServiceClient,
} from '@oc/messaging';
import { SqliteReadModelStore, startProjectionThread } from '@oc/readmodel';
import { createLogger, type Logger, telemetryEnabled, telemetryInstanceId } from '@oc/telemetry';
import { createVideo } from '@oc/video';
import { createWebhook, resolveSecretKey, webhookSettings } from '@oc/webhook';
import type { DynamicModule, INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { resolveAdminToken } from './admin-token';
import { STANDALONE_WEBHOOK_MODE, type StandaloneConfig } from './config';
import type { GatewayThreadCommand, GatewayThreadData, GatewayThreadEvent } from './gateway-thread';
import { version } from './version';

export interface StandaloneOptions {
  config: StandaloneConfig;
  clock?: Clock;
  ids?: IdSource;
  logger?: Logger;
  /** Create the demo organization and key when there is no organization yet (a first start). */
  demo?: boolean;
}

/**
 * Every service in one process over the in-process transport, with the embedded adapters: the SQLite
 * event store and each service's SQLite read models under DATA_DIR.
 */
export async function startStandalone(options: StandaloneOptions) {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? sortableIds;
  const logger = options.logger ?? createLogger({ service: 'standalone', level: config.LOG_LEVEL });
  await ensurePrivateDir(config.DATA_DIR);
  const admin = await resolveAdminToken(config.DATA_DIR, config.ADMIN_TOKEN);

  const eventsFile = join(config.DATA_DIR, 'events.sqlite');
  const stores = openSqliteStores({ filename: eventsFile, clock });
  const snapshots = openSnapshotStore(config.DATA_DIR, logger);
  await mkdir(join(config.DATA_DIR, 'read-models'), { recursive: true });
  /** Each service keeps its read models in a file of its own, as it would in a database of its own. */
  const readModelFile = (service: string) => join(config.DATA_DIR, 'read-models', `${service}.sqlite`);
  const SERVICES = ['billing', 'chat', 'video', 'webhook'];
  // The services query their read models here; the projection thread writes them.
  const readModelStores: Record<string, SqliteReadModelStore> = Object.fromEntries(
    SERVICES.map((service) => [
      service,
      new SqliteReadModelStore({ filename: readModelFile(service), writes: 'none', onRebuilt: (message) => logger.warn(message) }),
    ]),
  );
  const projectionThread = await startProjectionThread({
    entry: threadEntry('projection-thread'),
    eventStore: stores.store,
    eventsFile,
    readModelFiles: Object.fromEntries(SERVICES.map((service) => [service, readModelFile(service)])),
    onLost: (err) => {
      logger.fatal({ err }, 'the projection thread stopped; exiting');
      process.exit(70);
    },
  });
  const projector = projectionThread.projector;
  const readModels = (service: string) => readModelStores[service]!;
  const broker = new InProcessBroker();
  const inProcess = new InProcessServiceClient(broker);
  // With telemetry on (OTEL_*), requests between services, handlers and appends are traced; otherwise untouched.
  const traced = telemetryEnabled();
  const client: ServiceClient = traced ? traceServiceClient(inProcess, { system: 'in-process' }) : inProcess;
  const eventStore = traced ? traceEventStore(stores.store, { system: 'sqlite' }) : stores.store;
  const services: { close(): Promise<void> }[] = [];
  const apps: INestMicroservice[] = [];
  /** Starts a service's Nest microservice on the in-process transport. */
  const serve = async <S extends { module: DynamicModule; close(): Promise<void>; listening?(): void }>(service: S) => {
    const app = await NestFactory.createMicroservice(service.module, {
      strategy: new InProcessServerStrategy(broker),
      logger: false,
    });
    if (traced) app.useGlobalInterceptors(new MessageTracingInterceptor('in-process'));
    await app.listen();
    apps.push(app);
    services.push(service);
    return service;
  };

  // The gateway listens first, so that by default video URLs point at the address it actually got; it is
  // ready once the services below answer its pings.
  const gateway = await startGatewayThread({ broker, clock, config, adminToken: admin.token, version, logger });
  const url = `http://127.0.0.1:${gateway.port}`;

  // One shared log in this mode: billing's alerts and the webhook service read events straight from it.
  const bus = new EventStoreEventBus({ eventStores: { billing: stores.store, video: stores.store }, checkpoints: stores.checkpoints });
  const webhookKey = await resolveSecretKey(join(config.DATA_DIR, 'webhook-secret-key'), config.WEBHOOK_SECRET_KEY);
  // Built side by side: each catches its read models up on its own files and worker threads.
  const built = await Promise.all([
    createBilling({
      eventStore,
      snapshots,
      readModels: readModels('billing'),
      projector,
      client,
      clock,
      ids,
      logger: logger.child({ service: 'billing' }),
      callersInProcess: true,
      payments: paymentSettings(config),
      bus,
    }),
    createChat({
      eventStore,
      readModels: readModels('chat'),
      projector,
      client,
      clock,
      ids,
      logger: logger.child({ service: 'chat' }),
      ...chatSettings(config),
    }),
    createVideo({
      eventStore,
      readModels: readModels('video'),
      projector,
      client,
      clock,
      ids,
      logger: logger.child({ service: 'video' }),
      config,
      publicBaseUrl: config.PUBLIC_BASE_URL ?? url,
      dataDir: join(config.DATA_DIR, 'video'),
    }),
    createWebhook({
      eventStore,
      snapshots,
      readModels: readModels('webhook'),
      projector,
      bus,
      client,
      clock,
      ids,
      logger: logger.child({ service: 'webhook' }),
      settings: webhookSettings(config, STANDALONE_WEBHOOK_MODE, webhookKey),
      version,
    }),
  ]);
  // In this order, so that closing (in reverse) stops billing's callers before billing.
  for (const service of built) await serve(service);
  for (const service of built) if ('listening' in service) service.listening();

  const firstStart = await noOrganizationYet(inProcess);
  const demo = options.demo && firstStart ? await createDemo(inProcess) : undefined;

  return {
    url,
    adminToken: admin.token,
    adminTokenGenerated: admin.generated,
    adminTokenFile: admin.file,
    /** No organization existed when it started. */
    firstStart,
    demo,
    services: inProcess,
    readModels: readModelStores,
    /**
     * Stops every part. With `graceMs` (a signal), first the process is not ready and takes no new requests, while
     * what is in flight may finish for that long: the services' own work (chat completions, cut at the end of the
     * grace) and the gateway's requests, which end with it.
     */
    async close(graceMs?: number) {
      if (graceMs !== undefined) {
        await Promise.all([gateway.drain(graceMs + RELAYED_AFTER_CUT_MS), ...built.map((service) => ('drain' in service ? service.drain(graceMs) : undefined))]);
      }
      await gateway.close();
      for (const app of apps.reverse()) await app.close();
      for (const service of services.reverse()) await service.close();
      await projectionThread.close();
      await stores.close();
      snapshots.close();
      for (const store of Object.values(readModelStores)) await store.close();
    },
  };
}

export type Standalone = Awaited<ReturnType<typeof startStandalone>>;

/**
 * On a stop with a grace, the gateway's own grace runs this much longer than the services': what they cut at the
 * end of theirs (a chat stream's error event, a completion's 503) reaches its client through the gateway first.
 */
const RELAYED_AFTER_CUT_MS = 1_000;

async function noOrganizationYet(client: InProcessServiceClient): Promise<boolean> {
  const existing = unwrap(await client.request<{ data: Organization[] }>(Subjects.billing.listOrganizations, { limit: 1 }));
  return existing.data.length === 0;
}

async function createDemo(client: InProcessServiceClient) {
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

/**
 * Starts the gateway's thread and serves its port from the broker; resolves once it listens. The thread is
 * the built `gateway-thread.js` beside a bundle, or the TypeScript entry (through tsx) from the sources.
 */
async function startGatewayThread(options: {
  broker: InProcessBroker;
  clock: Clock;
  config: StandaloneConfig;
  adminToken: string;
  version: string;
  logger: Logger;
}): Promise<{ port: number; drain(graceMs: number): Promise<void>; close(): Promise<void> }> {
  const { port1, port2 } = new MessageChannel();
  const served = serveThreadClient(options.broker, port1);
  const data: GatewayThreadData = {
    port: port2,
    clock: shareClock(options.clock),
    config: options.config,
    adminToken: options.adminToken,
    version: options.version,
    serviceInstanceId: telemetryInstanceId(),
  };
  const worker = startThread(threadEntry('gateway-thread'), { workerData: data, transferList: [port2] });
  const events = (event: GatewayThreadEvent['kind']) =>
    new Promise<GatewayThreadEvent>((resolve, reject) => {
      const onMessage = (message: GatewayThreadEvent) => {
        if (message.kind !== event && message.kind !== 'failed') return;
        worker.off('message', onMessage);
        if (message.kind === 'failed') reject(new Error(`The gateway did not start: ${message.message}`));
        else resolve(message);
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`The gateway thread exited (${code})`)));
    });
  const listening = (await events('listening').catch(async (error: unknown) => {
    await worker.terminate();
    served.close();
    throw error;
  })) as Extract<GatewayThreadEvent, { kind: 'listening' }>;
  let closing = false;
  // A process whose gateway is gone serves nobody: it ends, so that whatever supervises it starts it again.
  const lost = (reason: unknown) => {
    if (closing) return;
    options.logger.fatal({ err: reason }, 'the gateway thread stopped; exiting');
    process.exit(70);
  };
  worker.on('error', lost);
  worker.on('exit', (code) => lost(new Error(`exit code ${code}`)));
  const command = (message: GatewayThreadCommand) => worker.postMessage(message);
  return {
    port: listening.port,
    async drain(graceMs) {
      const drained = events('drained');
      command({ kind: 'drain', graceMs });
      await drained;
    },
    async close() {
      closing = true;
      const closed = events('closed');
      command({ kind: 'close' });
      await closed.catch(() => undefined);
      await worker.terminate();
      served.close();
    },
  };
}

/** A thread entry of this package: the built file beside the bundle, or the TypeScript source. */
const threadEntry = (name: string) => new URL(import.meta.url.endsWith('.ts') ? `./${name}.ts` : `./${name}.js`, import.meta.url);
