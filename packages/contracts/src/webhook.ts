import { z } from 'zod';
import { listOf } from './billing';
import { BalanceLowDataSchema, BudgetThresholdDataSchema, PaymentEventDataSchema } from './billing-alerts';
import { VIDEO_WEBHOOK_EVENT_TYPES, VideoEventDataSchema, WEBHOOK_EVENT_TYPES } from './video-events';

// ---------- HTTP bodies of /v1/webhooks ----------

export const WebhookEventTypeSchema = z.enum(WEBHOOK_EVENT_TYPES);

/** A documented bound of our own: the spec leaves the number of webhooks per organization open. */
export const MAX_WEBHOOKS_PER_ORGANIZATION = 20;
export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const MAX_WEBHOOK_DESCRIPTION_LENGTH = 500;
/** `POST /v1/webhooks/{id}/recover` resends failures at most this far back (Svix offers the same). */
export const MAX_RECOVER_WINDOW_SECONDS = 14 * 86_400;

const known = new Set<string>(WEBHOOK_EVENT_TYPES);
/** Unknown types are refused on the array itself, so the 400 names `events` rather than `events[2]`. */
const EventTypes = z
  .array(z.string().max(100))
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length * 2)
  .refine((types) => types.every((t) => known.has(t)), {
    message: `each event type must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
  })
  .transform((types) => [...new Set(types)] as z.infer<typeof WebhookEventTypeSchema>[]);

/** The URL's scheme is checked by the webhook service, which alone knows whether plain http is allowed. */
const WebhookUrl = z.url({ protocol: /^https?$/ }).max(MAX_WEBHOOK_URL_LENGTH);
const Description = z.string().max(MAX_WEBHOOK_DESCRIPTION_LENGTH);

export const CreateWebhookBody = z.strictObject({
  url: WebhookUrl,
  events: EventTypes,
  description: Description.optional(),
});

export const UpdateWebhookBody = z
  .strictObject({
    url: WebhookUrl.optional(),
    events: EventTypes.optional(),
    description: Description.optional(),
    is_active: z.boolean().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'give at least one of url, events, description, is_active' });

export const TestWebhookBody = z.strictObject({
  event_type: WebhookEventTypeSchema.default('video.completed'),
});

export const RecoverWebhookBody = z.strictObject({
  /** Unix seconds: failed deliveries created at or after this time are sent again. */
  since: z.int().nonnegative(),
});

export const DeliveriesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().max(200).optional(),
});

/** Per-parameter 400 codes for `parseOrThrow`. */
export const WebhookValidationCodes = {
  url: 'invalid_url',
  events: 'invalid_events',
  description: 'invalid_description',
  is_active: 'invalid_is_active',
  event_type: 'invalid_event_type',
  since: 'invalid_since',
};

// ---------- Responses ----------

export const WebhookSchema = z.object({
  id: z.string(),
  object: z.literal('webhook'),
  url: z.string(),
  events: z.array(WebhookEventTypeSchema),
  description: z.string(),
  is_active: z.boolean(),
  created: z.int(),
  last_success_at: z.int().nullable(),
  last_failure_at: z.int().nullable(),
  failure_count: z.int(),
});
export type Webhook = z.infer<typeof WebhookSchema>;

export const CreatedWebhookSchema = WebhookSchema.extend({ secret: z.string() });
export type CreatedWebhook = z.infer<typeof CreatedWebhookSchema>;

export const WebhookSummarySchema = WebhookSchema.pick({ id: true, object: true, url: true, events: true, is_active: true, created: true });
export const WebhookListSchema = listOf(WebhookSummarySchema);

export const DeletedWebhookSchema = z.object({ id: z.string(), object: z.literal('webhook'), deleted: z.literal(true) });

export const WebhookRecoverySchema = z.object({
  object: z.literal('webhook_recovery'),
  webhook_id: z.string(),
  since: z.int(),
  /** Failed deliveries queued again. */
  requeued: z.int(),
});

export const RotatedSecretSchema = z.object({
  id: z.string(),
  object: z.literal('webhook_secret'),
  secret: z.string(),
  /** Until then deliveries are also signed with the previous secret. */
  previous_secret_expires_at: z.int(),
});

export const TestDeliveryResultSchema = z.union([
  z.object({ success: z.literal(true), status_code: z.int(), response_time_ms: z.int(), delivered_at: z.int() }),
  z.object({ success: z.literal(false), status_code: z.int().nullable(), response_time_ms: z.int(), message: z.string() }),
]);
export type TestDeliveryResult = z.infer<typeof TestDeliveryResultSchema>;

export const DeliveryAttemptSchema = z.object({
  id: z.string(),
  object: z.literal('webhook_delivery_attempt'),
  delivery_id: z.string(),
  event_id: z.string(),
  event_type: WebhookEventTypeSchema,
  attempt: z.int(),
  success: z.boolean(),
  status_code: z.int().nullable(),
  duration_ms: z.int(),
  error: z.string().nullable(),
  response_body: z.string().nullable(),
  /** The delivery's state after this attempt. */
  delivery_status: z.enum(['pending', 'succeeded', 'failed']),
  created: z.int(),
});
export type DeliveryAttempt = z.infer<typeof DeliveryAttemptSchema>;

export const DeliverySchema = z.object({
  id: z.string(),
  object: z.literal('webhook_delivery'),
  webhook_id: z.string(),
  event_id: z.string(),
  event_type: WebhookEventTypeSchema,
  status: z.enum(['pending', 'succeeded', 'failed']),
  attempts: z.int(),
  next_attempt_at: z.int().nullable(),
  created: z.int(),
});
export type Delivery = z.infer<typeof DeliverySchema>;

// ---------- The event a receiver gets ----------

/** The spec's envelope, its fields in the spec's order; `data` a video for video events, for billing's the object each type names. */
const envelope = <T extends z.ZodType, D extends z.ZodType>(type: T, data: D) => z.object({ id: z.string(), type, created: z.int(), data });

export const WebhookEnvelopeSchema = z.discriminatedUnion('type', [
  envelope(z.enum(VIDEO_WEBHOOK_EVENT_TYPES), VideoEventDataSchema),
  envelope(z.literal('billing.budget_threshold'), BudgetThresholdDataSchema),
  envelope(z.literal('balance.low'), BalanceLowDataSchema),
  envelope(z.enum(['billing.payment_succeeded', 'billing.payment_failed']), PaymentEventDataSchema),
]);
export type WebhookEnvelope = z.infer<typeof WebhookEnvelopeSchema>;

// ---------- The event stream (`GET /v1/webhooks/events/stream`) ----------

/** Query of the event stream: which event types to receive, comma-separated; the video events when absent. */
export const EventStreamQuery = z.object({
  events: z
    .string()
    .max(200)
    .transform((csv) => csv.split(',').map((t) => t.trim()).filter((t) => t.length > 0))
    .refine((types) => types.length > 0 && types.every((t) => known.has(t)), {
      message: `a comma-separated list of event types, each one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
    })
    .transform((types) => [...new Set(types)] as z.infer<typeof WebhookEventTypeSchema>[])
    .optional(),
});

/** `Last-Event-ID`: the `id` of the last event a listener received, as the stream sent it. */
export const LastEventIdSchema = z.string().regex(/^evt_[A-Za-z0-9]{1,64}$/);

/** The first event of every stream: it is live, and what it carries. */
export const EventStreamReadySchema = z.object({
  object: z.literal('webhook_event_stream'),
  organization_id: z.string(),
  events: z.array(WebhookEventTypeSchema),
  /** The `Last-Event-ID` the stream resumes after, or null for a fresh one. */
  resumed_after: z.string().nullable(),
});
export type EventStreamReady = z.infer<typeof EventStreamReadySchema>;

/** Sent instead of a replay when the service no longer holds the `Last-Event-ID`: events may have been missed. */
export const EventStreamGapSchema = z.object({ last_event_id: z.string(), message: z.string() });

/** Events one replay answer carries at most; the gateway asks again after the last one. */
export const EVENT_REPLAY_PAGE = 100;

/** What the webhook service broadcasts on `webhook.event_stream.<org_id>` for each video event it consumes. */
export const StreamedEventSchema = z.object({ org_id: z.string(), event: WebhookEnvelopeSchema });
export type StreamedEvent = z.infer<typeof StreamedEventSchema>;

export const EventReplaySchema = z.object({
  /** False when `after` is not among the events the service still holds (or is another organization's). */
  found: z.boolean(),
  events: z.array(WebhookEnvelopeSchema),
  has_more: z.boolean(),
});
export type EventReplay = z.infer<typeof EventReplaySchema>;

// ---------- NATS request/reply messages to the webhook service ----------

const Ref = { org_id: z.string().min(1), webhook_id: z.string().min(1).max(200) };

export const WebhookMessages = {
  create: CreateWebhookBody.extend({ org_id: Ref.org_id }),
  list: z.object({ org_id: Ref.org_id }),
  get: z.object(Ref),
  update: z.object({ ...Ref, changes: UpdateWebhookBody }),
  delete: z.object(Ref),
  test: TestWebhookBody.extend(Ref),
  rotateSecret: z.object(Ref),
  listDeliveries: DeliveriesQuery.extend(Ref),
  retryDelivery: z.object({ ...Ref, delivery_id: z.string().min(1).max(200) }),
  recover: RecoverWebhookBody.extend(Ref),
  /** Also the gateway's check, when a stream opens, that the webhook service answers (after its subscription). */
  replayEvents: z.object({
    org_id: Ref.org_id,
    /** Events after this one; absent, nothing is replayed. */
    after: LastEventIdSchema.optional(),
    types: z.array(WebhookEventTypeSchema).min(1).optional(),
    limit: z.int().min(1).max(EVENT_REPLAY_PAGE).default(EVENT_REPLAY_PAGE),
  }),
} as const;
export type WebhookMessage<K extends keyof typeof WebhookMessages> = z.infer<(typeof WebhookMessages)[K]>;

// ---------- Domain events of the webhook service ----------

/**
 * The stream categories the webhook service writes (`webhook-<id>`, `delivery-<id>`, and `webhookorg-<org>`,
 * an organization's webhooks counted against its limit): its outbox relay publishes these only.
 */
export const WebhookStreams = { webhook: 'webhook', delivery: 'delivery', organization: 'webhookorg' } as const;

/** Secrets travel and rest only in this form: AES-256-GCM under the service's key. */
const EncryptedSecret = z.string();
const WebhookRef = { webhook_id: z.string(), org_id: z.string() };

export const WebhookEvents = {
  WebhookCreated: z.object({
    ...WebhookRef,
    url: z.string(),
    events: z.array(WebhookEventTypeSchema),
    description: z.string(),
    secret: EncryptedSecret,
    created: z.int(),
  }),
  WebhookUpdated: z.object({
    ...WebhookRef,
    url: z.string().optional(),
    events: z.array(WebhookEventTypeSchema).optional(),
    description: z.string().optional(),
  }),
  /** Re-enabled by its owner: the consecutive-failure count starts again at 0. */
  WebhookEnabled: z.object(WebhookRef),
  WebhookDisabled: z.object({ ...WebhookRef, reason: z.enum(['owner', 'consecutive_failures']) }),
  WebhookDeleted: z.object({ ...WebhookRef, deleted: z.int() }),
  WebhookSecretRotated: z.object({
    ...WebhookRef,
    secret: EncryptedSecret,
    previous_secret: EncryptedSecret,
    previous_secret_expires_at: z.int(),
  }),
  WebhookAttemptSucceeded: z.object({ ...WebhookRef, at: z.int() }),
  WebhookAttemptFailed: z.object({ ...WebhookRef, at: z.int() }),

  DeliveryScheduled: z.object({
    delivery_id: z.string(),
    ...WebhookRef,
    event: WebhookEnvelopeSchema,
    /** Milliseconds since the epoch. */
    next_attempt_at: z.int(),
    /** The replica that makes the attempts (absent in events written before replicas). */
    replica: z.string().optional(),
  }),
  DeliveryAttempted: z.object({
    delivery_id: z.string(),
    ...WebhookRef,
    attempt: z.int().positive(),
    at: z.int(),
    success: z.boolean(),
    status_code: z.int().nullable(),
    duration_ms: z.int().nonnegative(),
    error: z.string().nullable(),
    response_body: z.string().nullable(),
    /** Milliseconds since the epoch; null once the delivery succeeded or its schedule is used up. */
    next_attempt_at: z.int().nullable(),
  }),
  /** Not attempted because the webhook is inactive or deleted; `recover` can send it later. */
  DeliveryAbandoned: z.object({ delivery_id: z.string(), ...WebhookRef, at: z.int(), reason: z.enum(['webhook_inactive', 'webhook_deleted']) }),
  /** Sent again by its owner (retry or recover): a fresh schedule, the same event id, made by `replica`. */
  DeliveryRequeued: z.object({ delivery_id: z.string(), ...WebhookRef, next_attempt_at: z.int(), replica: z.string().optional() }),
  /** Another replica makes the attempts from now on: the one that did stopped (`previous`, null before replicas). */
  DeliveryTakenOver: z.object({ delivery_id: z.string(), ...WebhookRef, replica: z.string(), previous: z.string().nullable() }),

  /** On `webhookorg-<org>`: a webhook counts against the organization's limit from now on (`at`, ms). */
  OrganizationWebhookAdded: z.object({ ...WebhookRef, at: z.int() }),
  /** On `webhookorg-<org>`: the webhook is deleted (or was never created), its place free again. */
  OrganizationWebhookRemoved: z.object(WebhookRef),
} as const;

export type WebhookDomainEventType = keyof typeof WebhookEvents;
export type WebhookDomainEvent = {
  [K in WebhookDomainEventType]: { type: K; data: z.infer<(typeof WebhookEvents)[K]> };
}[WebhookDomainEventType];
