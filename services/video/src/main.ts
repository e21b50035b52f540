import { telemetry } from './telemetry';
import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { runServiceProcess } from '@oc/service-runtime';
import pkg from '../package.json' with { type: 'json' };
import { createVideo } from './app';
import { videoProcessChecks, videoProcessConfig } from './process-config';

/** The video service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(videoProcessConfig, process.env, videoProcessChecks);

await runServiceProcess({
  service: 'video',
  version: pkg.version,
  config,
  telemetry,
  create: ({ eventStore, readModels, projector, client, logger, replicas }) =>
    createVideo({
      replicas,
      eventStore,
      readModels,
      projector,
      client,
      clock: systemClock,
      ids: sortableIds,
      logger,
      config,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      dataDir: config.DATA_DIR,
    }),
});
