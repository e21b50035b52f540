import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { runServiceProcess, serviceProcessConfig } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { createChat } from './app';
import { ChatConfigSchema, chatSettings } from './config';

/** The chat service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(serviceProcessConfig('chat').extend(ChatConfigSchema.shape));

await runServiceProcess({
  service: 'chat',
  version: pkg.version,
  config,
  create: ({ eventStore, readModels, client, logger }) =>
    createChat({ eventStore, readModels, client, clock: systemClock, ids: sortableIds, logger, ...chatSettings(config) }),
});
