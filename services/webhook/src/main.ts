import { join } from 'node:path';
import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { JetStreamEventBus } from '@oc/messaging';
import { runServiceProcess, serviceProcessConfig } from '@oc/service-runtime';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { resolveSecretKey } from './adapters/secret-box';
import { createWebhook, VIDEO_EVENTS_CONSUMER } from './app';
import { WebhookConfigSchema, webhookConfigChecks, webhookSettings } from './config';

/**
 * The webhook service as its own process over NATS; validated once at boot. Production mode unless
 * WEBHOOK_MODE=development; in production WEBHOOK_SECRET_KEY is required, in development one is generated
 * under DATA_DIR when it is unset (as standalone does).
 */
const config = configFromEnv(
  WebhookConfigSchema.extend(serviceProcessConfig('webhook').shape).extend({
    /** The JetStream durable consumer; replicas of one deployment share it. */
    WEBHOOK_CONSUMER: z.string().regex(/^[A-Za-z0-9_-]+$/).default(VIDEO_EVENTS_CONSUMER).describe('letters, digits, _ and -'),
  }),
  process.env,
  [webhookConfigChecks('production', { requireKeyInProduction: true })],
);

await runServiceProcess({
  service: 'webhook',
  version: pkg.version,
  config,
  create: async ({ eventStore, readModels, client, nc, logger }) =>
    createWebhook({
      eventStore,
      readModels,
      bus: new JetStreamEventBus(nc, { prefix: config.NATS_PREFIX }),
      client,
      consumerName: config.WEBHOOK_CONSUMER,
      clock: systemClock,
      ids: sortableIds,
      logger,
      settings: webhookSettings(
        config,
        'production',
        await resolveSecretKey(join(config.DATA_DIR, 'webhook-secret-key'), config.WEBHOOK_SECRET_KEY),
      ),
      version: pkg.version,
    }),
});
