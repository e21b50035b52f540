import { z } from 'zod';

/**
 * What the video service tells the rest of the system, and the webhook service delivers. Each of these
 * is a domain event on a `video-<id>` stream, relayed as `events.video.<type>`; `video` is exactly the
 * `data` object of the spec's Events section (`cost`, not `x-cost`).
 */
export const VideoEventDataSchema = z.object({
  id: z.string(),
  object: z.literal('video'),
  created: z.int(),
  model: z.string(),
  prompt: z.string(),
  status: z.enum(['queued', 'in_progress', 'completed', 'failed']),
  progress: z.int().min(0).max(100),
  url: z.string().nullable(),
  seconds: z.string().optional(),
  size: z.string().optional(),
  cost: z.object({ amount: z.number(), currency: z.string() }).optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});
export type VideoEventData = z.infer<typeof VideoEventDataSchema>;

const notification = z.object({ org_id: z.string(), video: VideoEventDataSchema });

export const VideoNotifications = {
  VideoProcessing: notification,
  VideoCompleted: notification,
  VideoFailed: notification,
} as const;
export type VideoNotificationType = keyof typeof VideoNotifications;
export type VideoNotification = z.infer<typeof notification>;

/** Video event types: what an event stream opened without `events` carries (it did before there were others). */
export const VIDEO_WEBHOOK_EVENT_TYPES = ['video.processing', 'video.completed', 'video.failed'] as const;
/** Billing's event types: only an endpoint or stream that names them in `events` receives them. */
export const BILLING_WEBHOOK_EVENT_TYPES = ['balance.low', 'billing.budget_threshold', 'billing.payment_succeeded', 'billing.payment_failed'] as const;
export const WEBHOOK_EVENT_TYPES = [...VIDEO_WEBHOOK_EVENT_TYPES, ...BILLING_WEBHOOK_EVENT_TYPES] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
export type VideoWebhookEventType = (typeof VIDEO_WEBHOOK_EVENT_TYPES)[number];
export type BillingWebhookEventType = (typeof BILLING_WEBHOOK_EVENT_TYPES)[number];

export const WEBHOOK_TYPE_OF: Record<VideoNotificationType, VideoWebhookEventType> = {
  VideoProcessing: 'video.processing',
  VideoCompleted: 'video.completed',
  VideoFailed: 'video.failed',
};

/** `evt_<id>` from the stored event's id: stable across retries and redeliveries, so receivers can de-duplicate. */
export const webhookEventId = (storedEventId: string) => `evt_${storedEventId.replaceAll('-', '')}`;
