import { StripeConfigSchema, stripeConfigChecks } from '@oc/billing';
import { ChatConfigSchema } from '@oc/chat';
import { type ConfigurationCheck, formatConfigurationProblem, parseConfiguration, ShutdownConfigSchema } from '@oc/contracts';
import { GatewayLimitsConfigSchema, HttpServerConfigSchema, RedisConfigSchema } from '@oc/gateway';
import { TelemetryConfigSchema } from '@oc/telemetry';
import { VideoConfigSchema, videoConfigChecks } from '@oc/video';
import { z } from 'zod';
import { WebhookConfigSchema, webhookConfigChecks } from '@oc/webhook';

/** Standalone configuration, validated once at boot; see the README's table for each variable. */
export const StandaloneConfigSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080).describe('a TCP port, 0 to 65535'),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('./.data'),
  ADMIN_TOKEN: z.string().min(16).optional().describe('at least 16 characters; unset, one is generated under DATA_DIR'),
  ...RedisConfigSchema.shape,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  KEY_USAGE_FLUSH_MS: z.coerce.number().int().positive().default(10_000),
  /** `production` puts webhooks in production mode unless WEBHOOK_MODE says otherwise. */
  NODE_ENV: z.string().optional(),
  ...HttpServerConfigSchema.shape,
  ...ShutdownConfigSchema.shape,
  ...GatewayLimitsConfigSchema.shape,
  ...VideoConfigSchema.shape,
  ...ChatConfigSchema.shape,
  ...WebhookConfigSchema.shape,
  ...StripeConfigSchema.shape,
  ...TelemetryConfigSchema.shape,
});
export type StandaloneConfig = z.infer<typeof StandaloneConfigSchema>;

/** A developer's `pnpm start`: webhooks in development mode unless NODE_ENV=production or WEBHOOK_MODE say otherwise. */
export const STANDALONE_WEBHOOK_MODE = 'development';

export const STANDALONE_CONFIG_CHECKS: readonly ConfigurationCheck[] = [videoConfigChecks, webhookConfigChecks(STANDALONE_WEBHOOK_MODE), stripeConfigChecks];

/** For tests and benchmarks: the same checks as the process, thrown as one error. */
export function loadStandaloneConfig(env: NodeJS.ProcessEnv = process.env): StandaloneConfig {
  const parsed = parseConfiguration(StandaloneConfigSchema, env, STANDALONE_CONFIG_CHECKS);
  if (!parsed.success) throw new Error(`Invalid configuration: ${parsed.problems.map(formatConfigurationProblem).join('; ')}`);
  return parsed.data;
}
