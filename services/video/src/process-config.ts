import { serviceProcessConfig } from '@oc/service-runtime/config';
import { z } from 'zod';
import { VideoConfigSchema, videoConfigChecks } from './config';

/** The video process's environment, as main.ts parses it at boot (and the deployment files are checked against). */
export const videoProcessConfig = VideoConfigSchema.extend(serviceProcessConfig('video').shape).extend({
  PUBLIC_BASE_URL: z.url().default('http://localhost:8080'),
});
export const videoProcessChecks = [videoConfigChecks];
