import { configFromEnv, sortableIds, systemClock } from '@oc/contracts';
import { runServiceProcess, serviceProcessConfig } from '@oc/service-runtime';
import { z } from 'zod';
import pkg from '../package.json' with { type: 'json' };
import { createVideo } from './app';
import { VideoConfigSchema, videoConfigChecks } from './config';

/** The video service as its own process over NATS; configuration validated once at boot. */
const config = configFromEnv(
  VideoConfigSchema.extend(serviceProcessConfig('video').shape).extend({ PUBLIC_BASE_URL: z.url().default('http://localhost:8080') }),
  process.env,
  [videoConfigChecks],
);

await runServiceProcess({
  service: 'video',
  version: pkg.version,
  config,
  create: ({ eventStore, readModels, client, logger }) =>
    createVideo({
      eventStore,
      readModels,
      client,
      clock: systemClock,
      ids: sortableIds,
      logger,
      config,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      dataDir: config.DATA_DIR,
    }),
});
