import { telemetry } from './telemetry';
import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { JetStreamEventBus } from '@oc/messaging';
import { runServiceProcess } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { createBilling } from './app';
import { paymentSettings, stripeConfigChecks } from './config';
import { billingProcessConfig } from './process-config';

/** The billing service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(billingProcessConfig, process.env, [stripeConfigChecks]);

await runServiceProcess({
  service: 'billing',
  version: pkg.version,
  config,
  telemetry,
  create: ({ eventStore, snapshots, readModels, projector, client, nc, logger, replicas }) =>
    createBilling({
      eventStore,
      snapshots,
      readModels,
      projector,
      client,
      clock: systemClock,
      ids: sortableIds,
      logger,
      replicas,
      payments: paymentSettings(config),
      // The alerts' process manager: billing's own events, once per deployment, through a JetStream durable consumer.
      bus: new JetStreamEventBus(nc, { prefix: config.NATS_PREFIX, ackWaitMs: 15_000 }),
    }),
});
