import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isCidr } from './adapters/destinations';
import type { WebhookSettings } from './app';

/**
 * The webhook service's variables, shared by its own process and the standalone one. `WEBHOOK_MODE`
 * has no default here: the distributed `main.ts` defaults to `production`, standalone to `development`.
 */
export const WebhookConfigSchema = z.object({
  WEBHOOK_MODE: z.enum(['production', 'development']).optional(),
  /** `1` lets deliveries reach loopback (local receivers) and lets webhooks use http://; development only. */
  WEBHOOK_ALLOW_PRIVATE: z.enum(['0', '1']).default('0'),
  /** Comma-separated CIDRs or addresses deliveries may reach although they are not public, in any mode. */
  WEBHOOK_ALLOW_CIDRS: z
    .string()
    .default('')
    .transform((csv) => csv.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
    .pipe(z.array(z.string().refine(isCidr, 'must be an IP address or a CIDR such as 10.1.2.0/24'))),
  /** 32 bytes, base64 or hex, that seal webhook secrets at rest. */
  WEBHOOK_SECRET_KEY: z.string().optional(),
  WEBHOOK_RETRY_DELAYS_MS: z
    .string()
    .default('0,1000,5000,25000')
    .transform((csv) => csv.split(',').map((s) => Number(s.trim())))
    .pipe(z.array(z.int().nonnegative().max(86_400_000)).min(1).max(20)),
  /** One deadline for the whole exchange; the spec's limit is 30 s. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(30_000),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce.number().int().min(1).max(1_000).default(10),
  WEBHOOK_MAX_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(50),
  WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT: z.coerce.number().int().min(1).max(100).default(2),
  WEBHOOK_MAX_RESPONSE_BYTES: z.coerce.number().int().min(0).max(1_048_576).default(4_096),
  WEBHOOK_ROTATION_GRACE_SECONDS: z.coerce.number().int().min(0).max(30 * 86_400).default(86_400),
  /** A PEM file of extra CAs to trust for receivers (a private CA); certificates are verified regardless. */
  WEBHOOK_CA_FILE: z.string().optional(),
});
export type WebhookConfig = z.infer<typeof WebhookConfigSchema>;

/** The settings the service runs with; refuses private addresses outside development mode. */
export function webhookSettings(
  config: WebhookConfig,
  defaultMode: 'production' | 'development',
  secretKey: string,
): WebhookSettings {
  const mode = config.WEBHOOK_MODE ?? defaultMode;
  if (config.WEBHOOK_ALLOW_PRIVATE === '1' && mode !== 'development') {
    throw new Error('WEBHOOK_ALLOW_PRIVATE=1 is allowed only with WEBHOOK_MODE=development');
  }
  return {
    secretKey,
    retryDelaysMs: config.WEBHOOK_RETRY_DELAYS_MS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    maxResponseBytes: config.WEBHOOK_MAX_RESPONSE_BYTES,
    disableAfterFailures: config.WEBHOOK_DISABLE_AFTER_FAILURES,
    maxConcurrent: config.WEBHOOK_MAX_CONCURRENCY,
    maxConcurrentPerEndpoint: config.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT,
    rotationGraceSeconds: config.WEBHOOK_ROTATION_GRACE_SECONDS,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE === '1',
    allowCidrs: config.WEBHOOK_ALLOW_CIDRS,
    ca: config.WEBHOOK_CA_FILE ? [readFileSync(config.WEBHOOK_CA_FILE, 'utf8')] : undefined,
  };
}
