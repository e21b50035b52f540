import { configFromEnv, randomIds, systemClock } from '@oc/contracts';
import { JetStreamEventBus } from '@oc/messaging';
import { runServiceProcess, serviceProcessConfig } from '@oc/service-runtime';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { createWebhook, VIDEO_EVENTS_CONSUMER } from './app';
import { WebhookConfigSchema, webhookSettings } from './config';

/**
 * The webhook service as its own process over NATS; validated once at boot. Production mode unless
 * WEBHOOK_MODE=development, and in production WEBHOOK_SECRET_KEY is required.
 */
const config = configFromEnv(WebhookConfigSchema.extend(serviceProcessConfig('webhook').shape).extend({
  WEBHOOK_SECRET_KEY: z.string().min(1),
  /** The JetStream durable consumer; replicas of one deployment share it. */
  WEBHOOK_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default(VIDEO_EVENTS_CONSUMER),
}));

await runServiceProcess({
  service: 'webhook',
  version: pkg.version,
  config,
  create: ({ eventStore, readModels, nc, logger }) =>
    createWebhook({
      eventStore,
      readModels,
      bus: new JetStreamEventBus(nc),
      consumerName: config.WEBHOOK_CONSUMER,
      clock: systemClock,
      ids: randomIds,
      logger,
      settings: webhookSettings(config, 'production', config.WEBHOOK_SECRET_KEY),
      version: pkg.version,
    }),
});
