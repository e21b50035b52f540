import { z } from 'zod';

/** `GET /v1/health`. */
export const HealthSchema = z.object({
  status: z.literal('ok'),
  version: z.string(),
  timestamp: z.iso.datetime(),
});
