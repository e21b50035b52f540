import { telemetry } from './telemetry';
import { join } from 'node:path';
import { configFromEnv, sortableIds, systemClock, VideoNotifications } from '@oc/contracts';
import { JetStreamEventBus } from '@oc/messaging';
import { runServiceProcess } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { resolveSecretKey } from './adapters/secret-box';
import { createWebhook } from './app';
import { BILLING_NOTIFICATIONS } from './application/billing-events';
import { webhookMode, webhookModeLine, webhookSettings } from './config';
import { webhookProcessChecks, webhookProcessConfig } from './process-config';

/**
 * The webhook service as its own process over NATS; validated once at boot. Production mode unless
 * WEBHOOK_MODE=development; in production WEBHOOK_SECRET_KEY is required, in development one is generated
 * under DATA_DIR when it is unset (as standalone does). Its first log line says which.
 */
const config = configFromEnv(webhookProcessConfig, process.env, webhookProcessChecks);

await runServiceProcess({
  service: 'webhook',
  version: pkg.version,
  config,
  telemetry,
  create: async ({ eventStore, snapshots, readModels, projector, client, nc, logger, replicas }) => {
    const mode = webhookMode(config, 'production');
    // Development mode is a warning: on a server it would let deliveries reach the host's own services.
    logger[mode.mode === 'production' ? 'info' : 'warn']({ webhook_mode: mode.mode }, webhookModeLine(mode, config.WEBHOOK_ALLOW_PRIVATE === '1'));
    // Turning a video event into deliveries takes milliseconds: an event its replica took to the grave goes
    // to another replica after 15 s rather than the bus's default minute.
    const bus = new JetStreamEventBus(nc, { prefix: config.NATS_PREFIX, ackWaitMs: 15_000 });
    return createWebhook({
      replicas,
      eventStore,
      snapshots,
      readModels,
      projector,
      bus,
      followVideoEvents: (handler) => bus.follow({ service: 'video', types: Object.keys(VideoNotifications) }, handler),
      followBillingEvents: (handler) => bus.follow({ service: 'billing', types: BILLING_NOTIFICATIONS }, handler),
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
    });
  },
});
