import { createHash } from 'node:crypto';
import {
  type Clock,
  type Replicas,
  unixSeconds,
  VideoNotifications,
  type VideoNotificationType,
  WEBHOOK_TYPE_OF,
  type WebhookEnvelope,
  webhookEventId,
} from '@oc/contracts';
import { causedBy, type CommandHandler, type EventMetadata, type EventStore, type StoredEvent, type StreamOrigin } from '@oc/eventstore';
import { inSpan } from '@oc/telemetry';
import { distinctValues, type ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import type { WebhookSender } from '../adapters/http-sender';
import type { SecretBox } from '../adapters/secret-box';
import { type DeliveryCommand, deliveryDecider, type DeliveryState, type DeliveryStatus, deliveryStream, NotDeliveryOwner } from '../domain/delivery';
import { signedRequest } from '../domain/signature';
import { type Webhook, type WebhookCommand, webhookDecider, webhookStream } from '../domain/webhook';
import { Collections, type DeliveryDoc, type WebhookDoc } from '../projections/documents';
import { DeliveryScheduler, type Timers } from './scheduler';
import { tracedAttempt } from './telemetry';

export interface DeliveryPolicy {
  /** Delay before each attempt, the first usually 0: "at once, then after 1 s, 5 s and 25 s". */
  retryDelaysMs: readonly number[];
  /** Consecutive failed attempts after which a webhook is disabled. */
  disableAfterFailures: number;
  maxConcurrent: number;
  maxConcurrentPerEndpoint: number;
}

export interface DeliveryDeps {
  eventStore: EventStore;
  commands: CommandHandler;
  readModels: ReadModels;
  sender: WebhookSender;
  secrets: SecretBox;
  clock: Clock;
  timers: Timers;
  policy: DeliveryPolicy;
  logger: Logger;
  userAgent: string;
  /** This replica's name (it attempts the deliveries it owns), and which of the others are gone. */
  replicas: Replicas;
}

/** Pending deliveries taken over per page. */
const TAKEOVER_PAGE = 500;

/** `dlv_…` from the event and the webhook: the same event reaching us twice maps to the same delivery. */
export const deliveryIdOf = (eventId: string, webhookId: string) =>
  `dlv_${createHash('sha256').update(`${eventId}:${webhookId}`).digest('hex').slice(0, 32)}`;

/** The secrets a delivery is signed with now: the current one, and the previous one during its grace period. */
export function signingSecrets(webhook: Webhook, secrets: SecretBox, nowSeconds: number): string[] {
  const current = secrets.open(webhook.sealedSecret);
  const previousLive =
    webhook.previousSealedSecret !== null && webhook.previousSecretExpiresAt !== null && nowSeconds < webhook.previousSecretExpiresAt;
  return previousLive ? [current, secrets.open(webhook.previousSealedSecret!)] : [current];
}

/** A webhook event: what one organization's receivers get for one video event. */
export interface WebhookEvent {
  orgId: string;
  envelope: WebhookEnvelope;
}

/**
 * The webhook event a consumed video event makes: undefined for a type no webhook carries, and for an event
 * that does not match its contract (no redelivery can fix it, so it is logged rather than allowed to block
 * the consumer forever).
 */
export function webhookEventOf(event: StoredEvent, logger: Logger): WebhookEvent | undefined {
  const type = event.type as VideoNotificationType;
  const schema = VideoNotifications[type];
  if (!schema) return undefined;
  const parsed = schema.safeParse(event.data);
  if (!parsed.success) {
    logger.error({ event_id: event.id, type }, 'video event does not match its contract; not delivered');
    return undefined;
  }
  return {
    orgId: parsed.data.org_id,
    envelope: { id: webhookEventId(event.id), type: WEBHOOK_TYPE_OF[type], created: unixSeconds(event.created), data: parsed.data.video },
  };
}

/**
 * Turns video events into deliveries and carries each delivery out: one attempt at a time, recorded on
 * the delivery's stream (which holds the retry schedule) and on the webhook's (which counts consecutive
 * failures and disables it at the limit). A delivery's attempts are made by one replica, the one its
 * stream names (the one that consumed the video event, or requeued the delivery); another takes it over,
 * by an append with the expected revision, once that one is gone. The decider records attempts only from
 * the owner, so each attempt is made once per due time, and at least once overall: an attempt in flight
 * when its replica died is made again by the next owner, with the same event id.
 */
export class Deliveries {
  readonly scheduler: DeliveryScheduler;
  /**
   * Streams as of the last attempt: an attempt reads only what was appended since. A webhook's stream
   * grows with every attempt it records, so reading it whole would cost more with every delivery.
   */

  constructor(private readonly deps: DeliveryDeps) {
    this.scheduler = new DeliveryScheduler({
      clock: deps.clock,
      timers: deps.timers,
      maxConcurrent: deps.policy.maxConcurrent,
      maxConcurrentPerEndpoint: deps.policy.maxConcurrentPerEndpoint,
      retryAfterErrorMs: 1_000,
      run: (deliveryId) => this.attempt(deliveryId),
      onError: (err, deliveryId) => deps.logger.warn({ err, delivery_id: deliveryId }, 'delivery attempt not recorded; will try again'),
    });
  }

  private get deliveries() {
    return this.deps.readModels.collection<DeliveryDoc>(Collections.deliveries);
  }

  /**
   * Every delivery pending or between retries when the service last stopped goes back on the schedule:
   * this replica's own, and those of replicas that are gone (or of none, from before replicas), taken over.
   * A live replica's are left to it.
   */
  async resume(): Promise<number> {
    const pending = await this.deliveries.find({ status: 'pending' }, { sort: { next_attempt_at: 1 } });
    const gone = new Map<string, Promise<boolean>>();
    let resumed = 0;
    for (const d of pending) {
      const owner = d.owner ?? null;
      if (owner === this.deps.replicas.self) this.scheduler.schedule(d._id, d.webhook_id, d.next_attempt_at ?? this.deps.clock.now());
      else {
        if (owner !== null && !gone.has(owner)) gone.set(owner, this.deps.replicas.isGone(owner));
        if (owner !== null && !(await gone.get(owner))) continue;
        if (!(await this.takeOver(d._id, owner))) continue;
      }
      resumed++;
    }
    return resumed;
  }

  /**
   * Takes over the pending deliveries of every replica that is gone (a sweep, every few seconds, where
   * replicas share the store): one index seek per replica that has any, then pages of that one's.
   */
  async takeOverFromGoneReplicas(): Promise<number> {
    const { self, isGone } = this.deps.replicas;
    let taken = 0;
    for (const owner of await distinctValues(this.deliveries, 'owner', { status: 'pending' })) {
      if (owner === self || !(await isGone(owner))) continue;
      for (let last = ''; ; ) {
        const page = await this.deliveries.find({ status: 'pending', owner, _id: { $gt: last } }, { sort: { _id: 1 }, limit: TAKEOVER_PAGE });
        for (const d of page) if (await this.takeOver(d._id, owner)) taken++;
        if (page.length < TAKEOVER_PAGE) break;
        last = page.at(-1)!._id;
      }
    }
    return taken;
  }

  /** Makes this replica the delivery's owner if `from` still is, and schedules its next attempt; whether it did. */
  private async takeOver(deliveryId: string, from: string | null): Promise<boolean> {
    const origin = await this.deps.commands.origin(deliveryStream(deliveryId));
    const { state } = await this.delivery(
      { type: 'TakeOverDelivery', deliveryId, replica: this.deps.replicas.self, from },
      origin && causedBy(origin),
    );
    if (state.status !== 'pending' || state.owner !== this.deps.replicas.self || state.nextAttemptAt === null) return false;
    this.scheduler.schedule(deliveryId, state.webhookId, state.nextAttemptAt);
    return true;
  }

  /**
   * Schedules a delivery of the event to each of the organization's active webhooks subscribed to its type.
   * `cause`: the stored event it comes from (`causedBy`), whose causal chain (and, traced, trace) the deliveries
   * continue.
   */
  async deliver({ orgId, envelope }: WebhookEvent, cause?: EventMetadata): Promise<void> {
    const webhooks = await this.deps.readModels
      .collection<WebhookDoc>(Collections.webhooks)
      .find({ org_id: orgId, is_active: true, events: { $elemMatch: { $eq: envelope.type } } });
    for (const webhook of webhooks) await this.schedule(webhook._id, webhook.org_id, envelope, cause);
  }

  /** `cause`: the event being delivered, when there is one (a test delivery has none: it is its own). */
  async schedule(webhookId: string, orgId: string, envelope: WebhookEnvelope, cause?: EventMetadata): Promise<void> {
    const deliveryId = deliveryIdOf(envelope.id, webhookId);
    const { state } = await this.delivery(
      {
        type: 'ScheduleDelivery',
        deliveryId,
        webhookId,
        orgId,
        event: envelope,
        now: this.deps.clock.now(),
        delays: this.deps.policy.retryDelaysMs,
        replica: this.deps.replicas.self,
      },
      cause,
    );
    // Consumed again after all (redelivered): its owner attempts it, or takes it over from a gone one.
    if (state.status === 'pending' && state.nextAttemptAt !== null && state.owner === this.deps.replicas.self) {
      this.scheduler.schedule(deliveryId, webhookId, state.nextAttemptAt);
    }
  }

  /** Sends a failed delivery again with a fresh schedule (same event id); the caller checked ownership. */
  async requeue(deliveryId: string, webhookId: string, orgId: string) {
    const result = await this.delivery({
      type: 'RequeueDelivery',
      deliveryId,
      webhookId,
      orgId,
      now: this.deps.clock.now(),
      delays: this.deps.policy.retryDelaysMs,
      replica: this.deps.replicas.self,
    });
    const { state } = result;
    if (state.status === 'pending' && state.nextAttemptAt !== null) this.scheduler.schedule(deliveryId, webhookId, state.nextAttemptAt);
    return result;
  }

  async attempt(deliveryId: string): Promise<void> {
    try {
      await this.attemptOwned(deliveryId);
    } catch (error) {
      // Another replica makes this delivery's attempts now (it was taken over while this one was sent).
      if (!(error instanceof NotDeliveryOwner)) throw error;
    }
  }

  private async attemptOwned(deliveryId: string): Promise<void> {
    const { clock } = this.deps;
    const state = await this.deps.commands.load(deliveryStream(deliveryId), deliveryDecider);
    if (state.status !== 'pending' || state.nextAttemptAt === null || state.owner !== this.deps.replicas.self) return;
    if (state.nextAttemptAt > clock.now()) {
      this.scheduler.schedule(deliveryId, state.webhookId, state.nextAttemptAt);
      return;
    }
    // Attempts run seconds or minutes after the delivery was scheduled: they continue its trace and its chain.
    const origin = await this.deps.commands.origin(deliveryStream(deliveryId));
    await inSpan(
      'webhook delivery',
      {
        parent: origin?.metadata.traceparent,
        attributes: { 'oc.webhook.delivery.id': deliveryId, 'oc.webhook.id': state.webhookId, 'oc.event_type': state.event.type, 'oc.webhook.attempt': state.attempts + 1 },
      },
      () => this.attemptNow(deliveryId, state, origin),
    );
  }

  private async attemptNow(deliveryId: string, state: Extract<DeliveryState, { status: DeliveryStatus }>, origin: StreamOrigin | undefined): Promise<void> {
    const { clock, policy } = this.deps;
    const cause = origin && causedBy(origin);
    const webhook = await this.deps.commands.load(webhookStream(state.webhookId), webhookDecider);
    if (webhook.status !== 'present' || !webhook.isActive) {
      const reason = webhook.status === 'present' ? 'webhook_inactive' : 'webhook_deleted';
      await this.delivery({ type: 'AbandonDelivery', deliveryId, at: clock.now(), reason, replica: this.deps.replicas.self }, cause);
      return;
    }
    const attempt = state.attempts + 1;
    const nowSeconds = unixSeconds(clock.now());
    const request = signedRequest(
      webhook.url,
      state.event,
      signingSecrets(webhook, this.deps.secrets, nowSeconds),
      nowSeconds,
      attempt,
      this.deps.userAgent,
    );
    const outcome = await tracedAttempt(
      { url: webhook.url, attempt, deliveryId, webhookId: state.webhookId, eventType: state.event.type },
      () => this.deps.sender.send(request),
    );
    const at = clock.now();
    const recorded = await this.delivery(
      { type: 'RecordAttempt', deliveryId, attempt, at, outcome, delays: policy.retryDelaysMs, replica: this.deps.replicas.self },
      cause,
    );
    if (recorded.events.length === 0) return;
    const counted = await this.webhook(
      {
        type: 'RecordAttempt',
        webhookId: state.webhookId,
        success: outcome.success,
        at: unixSeconds(at),
        disableAfterFailures: policy.disableAfterFailures,
      },
      cause,
    );
    const next = recorded.state;
    const webhookNow = counted.state;
    if (webhookNow.status === 'present' && webhookNow.isActive) {
      if (next.status === 'pending' && next.nextAttemptAt !== null) this.scheduler.schedule(deliveryId, state.webhookId, next.nextAttemptAt);
      return;
    }
    // Disabled by this failure, or while this attempt was on its way: the retry will not be made, so the
    // delivery ends now rather than looking pending until it would have come due.
    const reason = webhookNow.status === 'present' ? 'webhook_inactive' : 'webhook_deleted';
    await this.delivery({ type: 'AbandonDelivery', deliveryId, at: clock.now(), reason, replica: this.deps.replicas.self }, cause);
    if (counted.events.some((e) => e.type === 'WebhookDisabled')) await this.abandonPending(state.webhookId);
  }

  /**
   * The webhook was just disabled: its deliveries waiting for an attempt end now, failed and logged as not
   * sent. Those being attempted end when their outcome is recorded; another replica's, when their attempt
   * comes due there and finds the webhook inactive.
   */
  async abandonPending(webhookId: string): Promise<void> {
    const { self } = this.deps.replicas;
    const pending = await this.deliveries.find({ webhook_id: webhookId, status: 'pending' });
    for (const d of pending) {
      if ((d.owner ?? null) !== self || this.scheduler.attempting(d._id)) continue;
      const origin = await this.deps.commands.origin(deliveryStream(d._id));
      try {
        await this.delivery(
          { type: 'AbandonDelivery', deliveryId: d._id, at: this.deps.clock.now(), reason: 'webhook_inactive', replica: self },
          origin && causedBy(origin),
        );
      } catch (error) {
        // Taken over by another replica since the read model was written: that one ends it.
        if (!(error instanceof NotDeliveryOwner)) throw error;
      }
    }
  }

  stop(): Promise<void> {
    return this.scheduler.stop();
  }

  private delivery(command: DeliveryCommand, cause?: EventMetadata) {
    return this.deps.commands.handle(deliveryStream(command.deliveryId), deliveryDecider, command, cause);
  }

  private webhook(command: WebhookCommand, cause?: EventMetadata) {
    return this.deps.commands.handle(webhookStream(command.webhookId), webhookDecider, command, cause);
  }
}
