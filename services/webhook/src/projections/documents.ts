import type { WebhookEventType } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';
import type { DeliveryStatus } from '../domain/delivery';

export interface WebhookDoc {
  _id: string;
  org_id: string;
  url: string;
  events: WebhookEventType[];
  description: string;
  is_active: boolean;
  created: number;
  last_success_at: number | null;
  last_failure_at: number | null;
  failure_count: number;
  [key: string]: unknown;
}

export interface DeliveryDoc {
  _id: string;
  webhook_id: string;
  org_id: string;
  event_id: string;
  event_type: WebhookEventType;
  status: DeliveryStatus;
  attempts: number;
  /** Milliseconds since the epoch. */
  next_attempt_at: number | null;
  /** Unix seconds. */
  created: number;
  /** The replica that makes the attempts (absent or null on deliveries from before replicas). */
  owner?: string | null;
  [key: string]: unknown;
}

export interface AttemptDoc {
  _id: string;
  webhook_id: string;
  org_id: string;
  delivery_id: string;
  event_id: string;
  event_type: WebhookEventType;
  attempt: number;
  success: boolean;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  response_body: string | null;
  delivery_status: DeliveryStatus;
  created: number;
  position: number;
  [key: string]: unknown;
}

export const Collections = {
  webhooks: 'webhook_webhooks',
  deliveries: 'webhook_deliveries',
  attempts: 'webhook_delivery_attempts',
} as const;

/**
 * An organization's webhooks; pending deliveries by due time (resumed at start), and by the replica that
 * makes their attempts (taken over when it is gone); a webhook's failed deliveries since a time (recover); a
 * webhook's attempts, newest first (the delivery log).
 */
export const webhookCollections: CollectionSpec[] = [
  { name: Collections.webhooks, indexes: [['org_id', 'created']] },
  { name: Collections.deliveries, indexes: [['status', 'next_attempt_at'], ['status', 'owner'], ['webhook_id', 'status', 'created']] },
  { name: Collections.attempts, indexes: [['webhook_id', 'position']] },
];
