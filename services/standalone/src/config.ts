import { ChatConfigSchema } from '@oc/chat';
import { configurationProblems } from '@oc/contracts';
import { GatewayLimitsConfigSchema, HttpServerConfigSchema } from '@oc/gateway';
import { VideoConfigSchema } from '@oc/video';
import { z } from 'zod';
import { WebhookConfigSchema } from '@oc/webhook';

/** Standalone configuration, validated once at boot; see the README's table for each variable. */
export const StandaloneConfigSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('./.data'),
  ADMIN_TOKEN: z.string().min(16).optional(),
  REDIS_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  KEY_USAGE_FLUSH_MS: z.coerce.number().int().positive().default(10_000),
  ...HttpServerConfigSchema.shape,
  ...GatewayLimitsConfigSchema.shape,
  ...VideoConfigSchema.shape,
  ...ChatConfigSchema.shape,
  ...WebhookConfigSchema.shape,
});
export type StandaloneConfig = z.infer<typeof StandaloneConfigSchema>;

export function loadStandaloneConfig(env: NodeJS.ProcessEnv = process.env): StandaloneConfig {
  const parsed = StandaloneConfigSchema.safeParse(env);
  if (!parsed.success) throw new Error(`Invalid configuration: ${configurationProblems(parsed.error)}`);
  return parsed.data;
}
