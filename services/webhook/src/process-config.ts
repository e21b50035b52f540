import { serviceProcessConfig } from '@oc/service-runtime/config';
import { z } from 'zod';
import { VIDEO_EVENTS_CONSUMER } from './app';
import { WebhookConfigSchema, webhookConfigChecks } from './config';

/** The webhook process's environment, as main.ts parses it at boot (and the deployment files are checked against). */
export const webhookProcessConfig = WebhookConfigSchema.extend(serviceProcessConfig('webhook').shape).extend({
  /** The JetStream durable consumer; replicas of one deployment share it. */
  WEBHOOK_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default(VIDEO_EVENTS_CONSUMER).describe('letters, digits, _ and -'),
});
/** Production mode unless WEBHOOK_MODE=development, and then WEBHOOK_SECRET_KEY is required. */
export const webhookProcessChecks = [webhookConfigChecks('production', { requireKeyInProduction: true })];
