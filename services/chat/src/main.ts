import { telemetry } from './telemetry';
import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { runServiceProcess } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { createChat } from './app';
import { chatSettings } from './config';
import { chatProcessConfig } from './process-config';

/** The chat service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(chatProcessConfig);

await runServiceProcess({
  service: 'chat',
  version: pkg.version,
  config,
  telemetry,
  replicaId: config.CHAT_REPLICA_ID ?? config.REPLICA_ID,
  create: ({ eventStore, readModels, projector, client, logger, replicas }) =>
    createChat({ eventStore, readModels, projector, client, clock: systemClock, ids: sortableIds, logger, replicas, ...chatSettings(config) }),
});
