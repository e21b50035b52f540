import { randomBytes } from 'node:crypto';
import {
  type Clock,
  type CreatedWebhook,
  type Delivery,
  type DeliveryAttempt,
  DomainError,
  type IdSource,
  invalidRequest,
  MAX_RECOVER_WINDOW_SECONDS,
  MAX_WEBHOOKS_PER_ORGANIZATION,
  type TestDeliveryResult,
  unixSeconds,
  type VideoEventData,
  type VideoWebhookEventType,
  type WebhookEnvelope,
  type Webhook,
  type WebhookEventType,
  type WebhookMessage,
  webhookEventId,
} from '@oc/contracts';
import { aggregateStream, type CommandHandler, type EventStore } from '@oc/eventstore';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import { type DestinationRules, isRefusedDestination, type ResolveHost } from '../adapters/destinations';
import type { WebhookSender } from '../adapters/http-sender';
import type { SecretBox } from '../adapters/secret-box';
import { formatSecret, signedRequest } from '../domain/signature';
import { type WebhookCommand, webhookDecider, webhookStream } from '../domain/webhook';
import { organizationWebhooksDecider, organizationWebhooksStream } from '../domain/organization';
import { type AttemptDoc, Collections, type DeliveryDoc, type WebhookDoc } from '../projections/documents';
import { type Deliveries, signingSecrets } from './deliveries';
import type { EventFeed } from './event-feed';

export interface RegistrationPolicy {
  /** Development only: `http://` URLs for local receivers. */
  allowPlainHttp: boolean;
  /** Where deliveries may go; a URL that could only reach elsewhere is refused at registration. */
  destinations: DestinationRules;
  resolveHost: ResolveHost;
  /** How long a rotated-out secret still signs deliveries. */
  rotationGraceSeconds: number;
}

export interface WebhookServiceDeps {
  eventStore: EventStore;
  commands: CommandHandler;
  readModels: ReadModels;
  deliveries: Deliveries;
  sender: WebhookSender;
  secrets: SecretBox;
  clock: Clock;
  ids: IdSource;
  policy: RegistrationPolicy;
  userAgent: string;
  feed: EventFeed;
}

/** A place held this long by a webhook that was never stored belongs to a create that died. */
const LOST_PLACE_AFTER_MS = 60_000;

const isLimitReached = (error: unknown) =>
  error instanceof DomainError && error.detail.kind === 'InvalidState' && error.detail.code === 'webhook_limit_reached';

/** Registration, the test operation, rotation, and the owner's view of deliveries. */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  private get webhooks() {
    return this.deps.readModels.collection<WebhookDoc>(Collections.webhooks);
  }

  /** Stored when this resolves; the read models show it to any query made after (`readYourWrites`). */
  private webhook(command: WebhookCommand) {
    return this.deps.commands.handle(webhookStream(command.webhookId), webhookDecider, command);
  }

  private newSecret(): string {
    return formatSecret(randomBytes(32));
  }

  private async checkUrl(url: string) {
    const parsed = new URL(url);
    if (parsed.protocol !== 'https:' && !this.deps.policy.allowPlainHttp) {
      // The developer who meets this most is one pointing a webhook at a receiver on their own machine: say how.
      throw invalidRequest(
        'invalid_url',
        "Invalid 'url': webhook URLs must use https://. For a receiver on your own machine during development, run the " +
          'service with WEBHOOK_MODE=development and WEBHOOK_ALLOW_PRIVATE=1 (pnpm start is, unless NODE_ENV=production): ' +
          'it then accepts http:// and loopback URLs such as http://localhost:4242/webhooks.',
        'url',
      );
    }
    if (await isRefusedDestination(parsed, this.deps.policy.destinations, this.deps.policy.resolveHost)) {
      throw invalidRequest(
        'invalid_url',
        "Invalid 'url': webhooks must reach a public address, not a private, loopback, link-local or metadata one.",
        'url',
      );
    }
  }

  private async ownedDoc(orgId: string, webhookId: string): Promise<WebhookDoc> {
    const doc = await this.webhooks.findOne({ _id: webhookId, org_id: orgId });
    if (!doc) throw new DomainError({ kind: 'NotFound', resource: 'webhook', id: webhookId });
    return doc;
  }

  /**
   * The webhook first takes its place among the organization's (a decider, so replicas racing for the last
   * place cannot both have it), then is created; a create that fails gives its place back.
   */
  async create(m: WebhookMessage<'create'>): Promise<CreatedWebhook> {
    await this.checkUrl(m.url);
    const webhookId = this.deps.ids.next('wh_');
    await this.takePlace(m.org_id, webhookId);
    const secret = this.newSecret();
    try {
      await this.webhook({
        type: 'CreateWebhook',
        webhookId,
        orgId: m.org_id,
        url: m.url,
        events: m.events,
        description: m.description ?? '',
        sealedSecret: this.deps.secrets.seal(secret),
        now: unixSeconds(this.deps.clock.now()),
      });
    } catch (error) {
      await this.givePlaceBack(m.org_id, webhookId);
      throw error;
    }
    return { ...toWebhook(await this.ownedDoc(m.org_id, webhookId)), secret };
  }

  private async takePlace(orgId: string, webhookId: string, reconciled = false): Promise<void> {
    const stream = organizationWebhooksStream(orgId);
    // Webhooks made before the organization's count began are counted once, on its first use.
    const counted = (await this.deps.eventStore.readStream(stream, { maxCount: 1 })).length > 0;
    const existing = counted
      ? []
      : (await this.webhooks.find({ org_id: orgId }, { sort: { created: -1, _id: -1 }, limit: MAX_WEBHOOKS_PER_ORGANIZATION * 2 })).map((d) => d._id);
    try {
      await this.deps.commands.handle(stream, organizationWebhooksDecider, {
        type: 'AddWebhook',
        orgId,
        webhookId,
        max: MAX_WEBHOOKS_PER_ORGANIZATION,
        now: this.deps.clock.now(),
        existing,
      });
    } catch (error) {
      if (reconciled || !isLimitReached(error) || !(await this.freeLostPlaces(orgId))) throw error;
      await this.takePlace(orgId, webhookId, true);
    }
  }

  /**
   * Places held by no webhook: one deleted whose place was not given back, or one whose create died before
   * it was stored (a minute is far past any create's time). Only looked for at the limit; whether any was freed.
   */
  private async freeLostPlaces(orgId: string): Promise<boolean> {
    const places = await this.deps.commands.load(organizationWebhooksStream(orgId), organizationWebhooksDecider);
    let freed = false;
    for (const [webhookId, at] of places.webhooks) {
      const webhook = await this.deps.commands.load(webhookStream(webhookId), webhookDecider);
      const lost = webhook.status === 'deleted' || (webhook.status === 'absent' && this.deps.clock.now() >= at + LOST_PLACE_AFTER_MS);
      if (!lost) continue;
      await this.givePlaceBack(orgId, webhookId);
      freed = true;
    }
    return freed;
  }

  private async givePlaceBack(orgId: string, webhookId: string): Promise<void> {
    await this.deps.commands.handle(organizationWebhooksStream(orgId), organizationWebhooksDecider, { type: 'RemoveWebhook', orgId, webhookId });
  }

  async list(m: WebhookMessage<'list'>) {
    const docs = await this.webhooks.find({ org_id: m.org_id }, { sort: { created: -1, _id: -1 }, limit: MAX_WEBHOOKS_PER_ORGANIZATION * 2 });
    return {
      object: 'list' as const,
      data: docs.map((d) => ({ id: d._id, object: 'webhook' as const, url: d.url, events: d.events, is_active: d.is_active, created: d.created })),
      has_more: false,
    };
  }

  async get(m: WebhookMessage<'get'>): Promise<Webhook> {
    return toWebhook(await this.ownedDoc(m.org_id, m.webhook_id));
  }

  async update(m: WebhookMessage<'update'>): Promise<Webhook> {
    const { changes } = m;
    if (changes.url !== undefined) await this.checkUrl(changes.url);
    const { events } = await this.webhook({
      type: 'UpdateWebhook',
      webhookId: m.webhook_id,
      orgId: m.org_id,
      url: changes.url,
      events: changes.events,
      description: changes.description,
      isActive: changes.is_active,
    });
    if (events.some((e) => e.type === 'WebhookDisabled')) await this.deps.deliveries.abandonPending(m.webhook_id);
    return this.get(m);
  }

  async delete(m: WebhookMessage<'delete'>) {
    await this.webhook({ type: 'DeleteWebhook', webhookId: m.webhook_id, orgId: m.org_id, now: unixSeconds(this.deps.clock.now()) });
    // Should this be lost with the process, the next create at the limit finds the place held by a deleted webhook.
    await this.givePlaceBack(m.org_id, m.webhook_id);
    return { id: m.webhook_id, object: 'webhook' as const, deleted: true as const };
  }

  async rotateSecret(m: WebhookMessage<'rotateSecret'>) {
    const secret = this.newSecret();
    const expires = unixSeconds(this.deps.clock.now()) + this.deps.policy.rotationGraceSeconds;
    await this.webhook({
      type: 'RotateSecret',
      webhookId: m.webhook_id,
      orgId: m.org_id,
      sealedSecret: this.deps.secrets.seal(secret),
      previousSecretExpiresAt: expires,
    });
    return { id: m.webhook_id, object: 'webhook_secret' as const, secret, previous_secret_expires_at: expires };
  }

  /**
   * Sends one signed event with fake data now, to an active or inactive webhook alike, and reports what
   * the endpoint answered. It is not a delivery: it neither counts toward auto-disable nor enters the log.
   */
  async test(m: WebhookMessage<'test'>): Promise<TestDeliveryResult> {
    const { state } = await aggregateStream(this.deps.eventStore, webhookStream(m.webhook_id), webhookDecider);
    if (state.status !== 'present' || state.orgId !== m.org_id) {
      throw new DomainError({ kind: 'NotFound', resource: 'webhook', id: m.webhook_id });
    }
    const nowSeconds = unixSeconds(this.deps.clock.now());
    const envelope = fakeEnvelope(webhookEventId(`test${this.deps.ids.next('')}`), m.event_type, nowSeconds, m.org_id);
    const request = signedRequest(state.url, envelope, signingSecrets(state, this.deps.secrets, nowSeconds), nowSeconds, 1, this.deps.userAgent);
    const outcome = await this.deps.sender.send(request);
    if (outcome.success) {
      return {
        success: true,
        status_code: outcome.statusCode!,
        response_time_ms: outcome.durationMs,
        delivered_at: unixSeconds(this.deps.clock.now()),
      };
    }
    return {
      success: false,
      status_code: outcome.statusCode,
      response_time_ms: outcome.durationMs,
      message: outcome.error ?? 'delivery failed',
    };
  }

  async listDeliveries(m: WebhookMessage<'listDeliveries'>) {
    await this.ownedDoc(m.org_id, m.webhook_id);
    const attempts = this.deps.readModels.collection<AttemptDoc>(Collections.attempts);
    const page = await pageAfter(attempts, { webhook_id: m.webhook_id, org_id: m.org_id }, 'position', m);
    return { object: 'list' as const, data: page.data.map(toAttempt), has_more: page.has_more };
  }

  async retryDelivery(m: WebhookMessage<'retryDelivery'>) {
    const webhook = await this.ownedDoc(m.org_id, m.webhook_id);
    this.requireActive(webhook);
    const { state } = await this.deps.deliveries.requeue(m.delivery_id, m.webhook_id, m.org_id);
    const view = await this.deliveryView(m.delivery_id);
    // The answer is the delivery as this retry left it: by the time the read model is read, the new
    // attempt may already have been made.
    if (state.status === 'absent') return view;
    return {
      ...view,
      status: state.status,
      attempts: state.attempts,
      next_attempt_at: state.nextAttemptAt === null ? null : unixSeconds(state.nextAttemptAt),
    };
  }

  /** Resends every failed delivery of the webhook created since `since`, at most 14 days back. */
  async recover(m: WebhookMessage<'recover'>) {
    const webhook = await this.ownedDoc(m.org_id, m.webhook_id);
    this.requireActive(webhook);
    const now = unixSeconds(this.deps.clock.now());
    if (m.since < now - MAX_RECOVER_WINDOW_SECONDS || m.since > now) {
      throw invalidRequest('invalid_since', "Invalid 'since': it must be within the last 14 days.", 'since');
    }
    const failed = await this.deps.readModels
      .collection<DeliveryDoc>(Collections.deliveries)
      .find({ webhook_id: m.webhook_id, org_id: m.org_id, status: 'failed', created: { $gte: m.since } }, { sort: { created: 1 } });
    for (const d of failed) await this.deps.deliveries.requeue(d._id, m.webhook_id, m.org_id);
    return { object: 'webhook_recovery' as const, webhook_id: m.webhook_id, since: m.since, requeued: failed.length };
  }

  /** What a listener that reconnects missed; answering at all tells the gateway that the feed is there. */
  replayEvents(m: WebhookMessage<'replayEvents'>) {
    return this.deps.feed.replay({ orgId: m.org_id, after: m.after, types: m.types, limit: m.limit });
  }

  async ping() {
    await this.deps.readModels.ping();
    return { status: 'ok' as const };
  }

  private requireActive(webhook: WebhookDoc) {
    if (!webhook.is_active) {
      throw invalidRequest('webhook_inactive', `Webhook '${webhook._id}' is inactive; re-enable it with PATCH {"is_active": true} first.`);
    }
  }

  private async deliveryView(deliveryId: string): Promise<Delivery> {
    const doc = await this.deps.readModels.collection<DeliveryDoc>(Collections.deliveries).findOne({ _id: deliveryId });
    if (!doc) throw new DomainError({ kind: 'NotFound', resource: 'webhook_delivery', id: deliveryId });
    return {
      id: doc._id,
      object: 'webhook_delivery',
      webhook_id: doc.webhook_id,
      event_id: doc.event_id,
      event_type: doc.event_type,
      status: doc.status,
      attempts: doc.attempts,
      next_attempt_at: doc.next_attempt_at === null ? null : unixSeconds(doc.next_attempt_at),
      created: doc.created,
    };
  }
}

const toWebhook = (doc: WebhookDoc): Webhook => ({
  id: doc._id,
  object: 'webhook',
  url: doc.url,
  events: doc.events,
  description: doc.description,
  is_active: doc.is_active,
  created: doc.created,
  last_success_at: doc.last_success_at,
  last_failure_at: doc.last_failure_at,
  failure_count: doc.failure_count,
});

const toAttempt = (doc: AttemptDoc): DeliveryAttempt => ({
  id: doc._id,
  object: 'webhook_delivery_attempt',
  delivery_id: doc.delivery_id,
  event_id: doc.event_id,
  event_type: doc.event_type,
  attempt: doc.attempt,
  success: doc.success,
  status_code: doc.status_code,
  duration_ms: doc.duration_ms,
  error: doc.error,
  response_body: doc.response_body,
  delivery_status: doc.delivery_status,
  created: doc.created,
});

/** What the test operation sends: the shape of a real event of that type, plainly marked as a test. */
function fakeEnvelope(id: string, type: WebhookEventType, now: number, orgId: string): WebhookEnvelope {
  const organization_id = orgId;
  switch (type) {
    case 'billing.budget_threshold':
      return {
        id,
        type,
        created: now,
        data: { object: 'budget_alert', organization_id, month: new Date(now * 1000).toISOString().slice(0, 7), threshold: 50, monthly_budget: 100, spent: 50, currency: 'usd' },
      };
    case 'balance.low':
      return { id, type, created: now, data: { object: 'balance_alert', organization_id, balance: 4.5, low_balance: 5, currency: 'usd' } };
    case 'billing.payment_succeeded':
    case 'billing.payment_failed':
      return { id, type, created: now, data: { object: 'payment', id: 'pi_test', organization_id, amount: 20, currency: 'usd' } };
    default:
      return { id, type, created: now, data: fakeVideo(type, now) };
  }
}

function fakeVideo(type: VideoWebhookEventType, now: number): VideoEventData {
  const base = {
    id: 'video_test',
    object: 'video' as const,
    created: now,
    model: 'video-2',
    prompt: 'A test event from POST /v1/webhooks/{id}/test',
  };
  switch (type) {
    case 'video.processing':
      return { ...base, status: 'in_progress', progress: 10, url: null };
    case 'video.completed':
      return {
        ...base,
        status: 'completed',
        progress: 100,
        url: 'https://example.com/video_test.mp4',
        seconds: '4',
        size: '1280x720',
        cost: { amount: 0, currency: 'usd' },
      };
    case 'video.failed':
      return { ...base, status: 'failed', progress: 35, url: null, error: { code: 'generation_failed', message: 'A test failure.' } };
    default: {
      const never: never = type;
      return never;
    }
  }
}
