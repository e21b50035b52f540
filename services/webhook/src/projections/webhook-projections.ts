import { unixSeconds, type WebhookDomainEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { documentProjection, type Projection } from '@oc/readmodel';
import { type AttemptDoc, Collections, type DeliveryDoc, type WebhookDoc } from './documents';

type Stored = StoredEvent & WebhookDomainEvent;

/** The webhooks an organization sees; a deleted one is gone. Secrets are not projected. */
export const webhooksProjection = documentProjection<WebhookDoc>({
  name: 'webhook-webhooks',
  collection: Collections.webhooks,
  canHandle: [
    'WebhookCreated',
    'WebhookUpdated',
    'WebhookEnabled',
    'WebhookDisabled',
    'WebhookDeleted',
    'WebhookAttemptSucceeded',
    'WebhookAttemptFailed',
  ],
  documentId: (event) => (event.data as { webhook_id: string }).webhook_id,
  evolve(doc, stored) {
    const event = stored as Stored;
    switch (event.type) {
      case 'WebhookCreated':
        return {
          _id: event.data.webhook_id,
          org_id: event.data.org_id,
          url: event.data.url,
          events: event.data.events,
          description: event.data.description,
          is_active: true,
          created: event.data.created,
          last_success_at: null,
          last_failure_at: null,
          failure_count: 0,
        };
      case 'WebhookUpdated':
        return (
          doc && {
            ...doc,
            ...(event.data.url !== undefined ? { url: event.data.url } : {}),
            ...(event.data.events !== undefined ? { events: event.data.events } : {}),
            ...(event.data.description !== undefined ? { description: event.data.description } : {}),
          }
        );
      case 'WebhookEnabled':
        return doc && { ...doc, is_active: true, failure_count: 0 };
      case 'WebhookDisabled':
        return doc && { ...doc, is_active: false };
      case 'WebhookDeleted':
        return null;
      case 'WebhookAttemptSucceeded':
        return doc && { ...doc, last_success_at: event.data.at, failure_count: 0 };
      case 'WebhookAttemptFailed':
        return doc && { ...doc, last_failure_at: event.data.at, failure_count: doc.failure_count + 1 };
      default:
        return doc;
    }
  },
});

/** Why an attempt that came due was not made, as its row in the log says. */
const NOT_SENT = { webhook_inactive: 'not sent: the webhook was disabled', webhook_deleted: 'not sent: the webhook was deleted' } as const;

/** Each delivery's state, and the log of its attempts (and of the attempts not made). */
export const deliveriesProjection: Projection = {
  name: 'webhook-deliveries',
  canHandle: ['DeliveryScheduled', 'DeliveryAttempted', 'DeliveryAbandoned', 'DeliveryRequeued', 'DeliveryTakenOver'],
  async handle(stored, ctx) {
    const event = stored as Stored;
    const deliveries = ctx.collection<DeliveryDoc>(Collections.deliveries);
    if (event.type === 'DeliveryScheduled') {
      await deliveries.create({
        _id: event.data.delivery_id,
        webhook_id: event.data.webhook_id,
        org_id: event.data.org_id,
        event_id: event.data.event.id,
        event_type: event.data.event.type,
        status: 'pending',
        attempts: 0,
        next_attempt_at: event.data.next_attempt_at,
        created: unixSeconds(stored.created),
        owner: event.data.replica ?? null,
      });
      return;
    }
    const delivery = await deliveries.get((event.data as { delivery_id: string }).delivery_id);
    if (!delivery) return;
    switch (event.type) {
      case 'DeliveryAttempted': {
        const d = event.data;
        const status = d.success ? 'succeeded' : d.next_attempt_at === null ? 'failed' : 'pending';
        await deliveries.put({ ...delivery, status, attempts: d.attempt, next_attempt_at: d.next_attempt_at });
        await ctx.collection<AttemptDoc>(Collections.attempts).create({
          _id: `${d.delivery_id}.${d.attempt}`,
          webhook_id: d.webhook_id,
          org_id: d.org_id,
          delivery_id: d.delivery_id,
          event_id: delivery.event_id,
          event_type: delivery.event_type,
          attempt: d.attempt,
          success: d.success,
          status_code: d.status_code,
          duration_ms: d.duration_ms,
          error: d.error,
          response_body: d.response_body,
          delivery_status: status,
          created: unixSeconds(d.at),
          position: stored.position,
        });
        return;
      }
      case 'DeliveryAbandoned': {
        const d = event.data;
        await deliveries.put({ ...delivery, status: 'failed', next_attempt_at: null });
        // The log is what an owner reads: without a row here, its newest row for the delivery would say
        // pending forever (or, never attempted, it would not be there at all to resend).
        await ctx.collection<AttemptDoc>(Collections.attempts).create({
          _id: `${d.delivery_id}.not_sent.${stored.position}`,
          webhook_id: d.webhook_id,
          org_id: d.org_id,
          delivery_id: d.delivery_id,
          event_id: delivery.event_id,
          event_type: delivery.event_type,
          attempt: delivery.attempts + 1,
          success: false,
          status_code: null,
          duration_ms: 0,
          error: NOT_SENT[d.reason],
          response_body: null,
          delivery_status: 'failed',
          created: unixSeconds(d.at),
          position: stored.position,
        });
        return;
      }
      case 'DeliveryRequeued':
        await deliveries.put({ ...delivery, status: 'pending', next_attempt_at: event.data.next_attempt_at, owner: event.data.replica ?? delivery.owner ?? null });
        return;
      case 'DeliveryTakenOver':
        await deliveries.put({ ...delivery, owner: event.data.replica });
        return;
      default:
        return;
    }
  },
};

export const webhookProjections = [webhooksProjection, deliveriesProjection];
