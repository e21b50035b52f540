import { hostname } from 'node:os';
import { aloneReplica, type Clock, type IdSource, type Replicas, repeatByClock, VideoNotifications } from '@oc/contracts';
import { causedBy, CommandHandler, type EventStore, type SnapshotStore, type StoredEvent, type Subscription } from '@oc/eventstore';
import type { DurableEventBus, ServiceClient } from '@oc/messaging';
import { projectInThisThread, type ProjectorFactory, type ReadModelStore, readLatest, readYourWrites } from '@oc/readmodel';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { webhookReadModels } from './projections';
import { type DestinationRules, type ResolveHost, resolveWithDns } from './adapters/destinations';
import { HttpWebhookSender } from './adapters/http-sender';
import { SecretBox } from './adapters/secret-box';
import { BILLING_NOTIFICATIONS, billingWebhookEventOf } from './application/billing-events';
import { Deliveries, type DeliveryPolicy, webhookEventOf } from './application/deliveries';
import { EventFeed } from './application/event-feed';
import { systemTimers, type Timers } from './application/scheduler';
import { type RegistrationPolicy, WebhookService } from './application/webhooks';
import { LOGGER, WEBHOOK_SERVICE, WebhookController } from './transport/webhook.controller';

/** The name of the durable consumer of video events; replicas share it. */
export const VIDEO_EVENTS_CONSUMER = 'webhook-deliveries';

export interface WebhookSettings {
  /** 32-byte key (base64 or hex) that seals webhook secrets at rest. */
  secretKey: string;
  retryDelaysMs: readonly number[];
  timeoutMs: number;
  maxResponseBytes: number;
  disableAfterFailures: number;
  maxConcurrent: number;
  maxConcurrentPerEndpoint: number;
  rotationGraceSeconds: number;
  /** Development only: loopback addresses and plain http, for local receivers. */
  allowPrivate: boolean;
  /** Non-public ranges deliveries may reach all the same (`WEBHOOK_ALLOW_CIDRS`). */
  allowCidrs?: readonly string[];
  /** Extra CAs to trust (PEM), e.g. a local receiver's. */
  ca?: string[] | undefined;
  /** Events held for listeners that reconnect with `Last-Event-ID` (`WEBHOOK_STREAM_REPLAY_EVENTS`). */
  streamReplayEvents: number;
}

export interface WebhookRuntime {
  eventStore: EventStore;
  readModels: ReadModelStore;
  /** Where the projections run; in this thread unless the process runs them in a projection thread. */
  projector?: ProjectorFactory;
  /** Where video events come from: JetStream over NATS, the shared event store embedded. */
  bus: DurableEventBus;
  /** Where the live feed of events goes: broadcasts to the gateways' event streams. */
  client: Pick<ServiceClient, 'broadcast'>;
  /**
   * Every video event from now on, in one order, to this process alone (JetStream: an ordered consumer of its
   * own). Given, the event feed is filled from it, so that every replica holds and broadcasts every event in
   * the same order; absent (one process), from the durable consumer's handler.
   */
  followVideoEvents?: (handler: (event: StoredEvent) => void) => Promise<Subscription>;
  /** As `followVideoEvents`, for billing's alerts and payment outcomes. */
  followBillingEvents?: (handler: (event: StoredEvent) => void) => Promise<Subscription>;
  /** Defaults to VIDEO_EVENTS_CONSUMER; billing's events are consumed under this name with `-billing` added. */
  consumerName?: string;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  settings: WebhookSettings;
  version: string;
  timers?: Timers;
  /** How registration resolves a URL's host name; DNS by default. */
  resolveHost?: ResolveHost;
  /**
   * Replicas of webhook on the same event store (its own process): each attempts the deliveries it
   * scheduled and takes over those of a replica that is gone. Absent, this process is alone.
   */
  replicas?: Replicas;
  /** Where long streams' states (a busy endpoint's) are kept every so many events; without it, they load from the first. */
  snapshots?: SnapshotStore;
}

/** How often a replica looks for the deliveries of replicas that are gone (by the injected clock). */
export const TAKEOVER_SWEEP_MS = 5_000;

@Module({})
export class WebhookModule {
  static register(service: WebhookService, logger: Logger): DynamicModule {
    return {
      module: WebhookModule,
      controllers: [WebhookController],
      providers: [
        { provide: WEBHOOK_SERVICE, useValue: service },
        { provide: LOGGER, useValue: logger },
      ],
    };
  }
}

/**
 * Builds the webhook service, catches its read models up, puts every pending delivery back on the
 * schedule, and starts consuming video events.
 */
export async function createWebhook(runtime: WebhookRuntime) {
  const { settings, logger } = runtime;
  const projections = (runtime.projector ?? projectInThisThread)({
    service: 'webhook',
    set: webhookReadModels,
    eventStore: runtime.eventStore,
    readModels: runtime.readModels,
    onError: (err) => logger.error({ err }, 'webhook projection stopped'),
  });
  await projections.start();
  const destinations: DestinationRules = { allowLoopback: settings.allowPrivate, allowCidrs: settings.allowCidrs ?? [] };
  const sender = new HttpWebhookSender({
    timeoutMs: settings.timeoutMs,
    maxResponseBytes: settings.maxResponseBytes,
    destinations,
    ca: settings.ca,
  });
  const secrets = SecretBox.fromConfig(settings.secretKey);
  const replicas = runtime.replicas ?? aloneReplica(hostname());
  const commands = new CommandHandler(runtime.eventStore, {
    otherWriters: replicas.shared,
    snapshots: runtime.snapshots,
  });
  const readModels = replicas.shared
    ? readLatest(runtime.readModels, projections, runtime.eventStore)
    : readYourWrites(runtime.readModels, projections, commands);
  const userAgent = `OC-Webhooks/${runtime.version}`;
  const policy: DeliveryPolicy = {
    retryDelaysMs: settings.retryDelaysMs,
    disableAfterFailures: settings.disableAfterFailures,
    maxConcurrent: settings.maxConcurrent,
    maxConcurrentPerEndpoint: settings.maxConcurrentPerEndpoint,
  };
  const deliveries = new Deliveries({
    eventStore: runtime.eventStore,
    commands,
    readModels,
    sender,
    secrets,
    clock: runtime.clock,
    timers: runtime.timers ?? systemTimers,
    policy,
    logger,
    userAgent,
    replicas,
  });
  const registration: RegistrationPolicy = {
    allowPlainHttp: settings.allowPrivate,
    destinations,
    resolveHost: runtime.resolveHost ?? resolveWithDns,
    rotationGraceSeconds: settings.rotationGraceSeconds,
  };
  const feed = new EventFeed(runtime.client, settings.streamReplayEvents, logger);
  const service = new WebhookService({
    eventStore: runtime.eventStore,
    commands,
    readModels,
    deliveries,
    sender,
    secrets,
    clock: runtime.clock,
    ids: runtime.ids,
    policy: registration,
    userAgent,
    feed,
  });
  const resumed = await deliveries.resume();
  if (resumed > 0) logger.info({ resumed }, 'pending webhook deliveries resumed');
  /** The durable consumer's handler: idempotent, since the bus redelivers after a crash. */
  const onVideoEvent = async (event: StoredEvent) => {
    const webhookEvent = webhookEventOf(event, logger);
    if (!webhookEvent) return;
    if (!runtime.followVideoEvents) feed.publish(webhookEvent);
    // The deliveries continue the video event's causal chain (and, traced, its trace).
    await deliveries.deliver(webhookEvent, causedBy(event));
  };
  // With replicas, the durable consumer hands each event to one of them: the feed follows every event itself.
  const following = await runtime.followVideoEvents?.((event) => {
    const webhookEvent = webhookEventOf(event, logger);
    if (webhookEvent) feed.publish(webhookEvent);
  });
  const consumer = await runtime.bus.consume(
    runtime.consumerName ?? VIDEO_EVENTS_CONSUMER,
    { service: 'video', types: Object.keys(VideoNotifications) },
    onVideoEvent,
  );
  // Billing's events become deliveries the same way, through a durable consumer of their own.
  const onBillingEvent = async (event: StoredEvent) => {
    const webhookEvent = billingWebhookEventOf(event, logger);
    if (!webhookEvent) return;
    if (!runtime.followBillingEvents) feed.publish(webhookEvent);
    await deliveries.deliver(webhookEvent, causedBy(event));
  };
  const followingBilling = await runtime.followBillingEvents?.((event) => {
    const webhookEvent = billingWebhookEventOf(event, logger);
    if (webhookEvent) feed.publish(webhookEvent);
  });
  const billingConsumer = await runtime.bus.consume(
    `${runtime.consumerName ?? VIDEO_EVENTS_CONSUMER}-billing`,
    { service: 'billing', types: BILLING_NOTIFICATIONS },
    onBillingEvent,
  );
  const takeovers = replicas.shared
    ? repeatByClock(
        runtime.clock,
        TAKEOVER_SWEEP_MS,
        async () => {
          const taken = await deliveries.takeOverFromGoneReplicas();
          if (taken > 0) logger.warn({ taken }, 'webhook deliveries of a stopped replica taken over');
        },
        (err) => logger.warn({ err }, 'looking for the deliveries of stopped replicas failed; will retry'),
      )
    : undefined;
  return {
    service,
    deliveries,
    feed,
    onVideoEvent,
    projections,
    module: WebhookModule.register(service, logger),
    async close() {
      await takeovers?.stop();
      await following?.stop();
      await followingBilling?.stop();
      await consumer.stop();
      await billingConsumer.stop();
      await deliveries.stop();
      sender.close();
      await projections.stop();
    },
  };
}
