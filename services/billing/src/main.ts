import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { runServiceProcess, serviceProcessConfig } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { createBilling } from './app';

/** The billing service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(serviceProcessConfig('billing'));

await runServiceProcess({
  service: 'billing',
  version: pkg.version,
  config,
  create: ({ eventStore, readModels, client, logger }) =>
    createBilling({ eventStore, readModels, client, clock: systemClock, ids: sortableIds, logger }),
});
