import { accessSync, constants, readFileSync } from 'node:fs';
import type { ConfigurationCheck, ConfigurationProblem } from '@oc/contracts';
import { z } from 'zod';
import { isCidr } from './adapters/destinations';
import { isSecretKey } from './adapters/secret-box';
import type { WebhookSettings } from './app';

const readable = (file: string) => {
  try {
    accessSync(file, constants.R_OK);
    return true;
  } catch {
    return false;
  }
};

const SECRET_KEY_FORM = '32 bytes as base64 or 64 hex digits, e.g. from `openssl rand -base64 32`';

/**
 * The webhook service's variables, shared by its own process and the standalone one. `WEBHOOK_MODE` has no
 * default here: see `webhookMode`.
 */
export const WebhookConfigSchema = z.object({
  WEBHOOK_MODE: z.enum(['production', 'development']).optional().describe('production or development'),
  /** `1` lets deliveries reach loopback (local receivers) and lets webhooks use http://; development only. */
  WEBHOOK_ALLOW_PRIVATE: z.enum(['0', '1']).default('0'),
  /** Comma-separated CIDRs or addresses deliveries may reach although they are not public, in any mode. */
  WEBHOOK_ALLOW_CIDRS: z
    .string()
    .default('')
    .transform((csv) => csv.split(',').map((s) => s.trim()).filter((s) => s.length > 0))
    .pipe(z.array(z.string().refine(isCidr, 'must be an IP address or a CIDR such as 10.1.2.0/24')))
    .describe('comma-separated IP addresses or CIDRs'),
  /** 32 bytes, base64 or hex, that seal webhook secrets at rest. */
  WEBHOOK_SECRET_KEY: z.string().refine(isSecretKey, `must be ${SECRET_KEY_FORM}`).optional(),
  WEBHOOK_RETRY_DELAYS_MS: z
    .string()
    .default('0,1000,5000,25000')
    .transform((csv) => csv.split(',').map((s) => Number(s.trim())))
    .pipe(z.array(z.int().nonnegative().max(86_400_000)).min(1).max(20))
    .describe('1 to 20 comma-separated delays in milliseconds, each at most 86400000'),
  /** One deadline for the whole exchange; the spec's limit is 30 s. */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(30_000),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce.number().int().min(1).max(1_000).default(10),
  WEBHOOK_MAX_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).default(50),
  WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT: z.coerce.number().int().min(1).max(100).default(2),
  WEBHOOK_MAX_RESPONSE_BYTES: z.coerce.number().int().min(0).max(1_048_576).default(4_096),
  WEBHOOK_ROTATION_GRACE_SECONDS: z.coerce.number().int().min(0).max(30 * 86_400).default(86_400),
  /** Video events held for event-stream listeners that reconnect with Last-Event-ID (a few KiB each at most). */
  WEBHOOK_STREAM_REPLAY_EVENTS: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  /** A PEM file of extra CAs to trust for receivers (a private CA); certificates are verified regardless. */
  WEBHOOK_CA_FILE: z.string().refine(readable, 'must be a readable file of PEM certificates').optional(),
});
export type WebhookConfig = z.infer<typeof WebhookConfigSchema>;

export type WebhookMode = 'production' | 'development';

/**
 * The delivery mode and why: WEBHOOK_MODE when set; else production under NODE_ENV=production, since a host
 * marked production must not deliver to its own loopback services because WEBHOOK_MODE was left out; else the
 * process's default (its own process: production; standalone, a developer's `pnpm start`: development).
 */
export function webhookMode(
  env: { WEBHOOK_MODE?: string | undefined; NODE_ENV?: string | undefined },
  defaultMode: WebhookMode,
): { mode: WebhookMode; because: string } {
  if (env.WEBHOOK_MODE === 'production' || env.WEBHOOK_MODE === 'development') {
    return { mode: env.WEBHOOK_MODE, because: `WEBHOOK_MODE=${env.WEBHOOK_MODE}` };
  }
  if (env.NODE_ENV === 'production') return { mode: 'production', because: 'NODE_ENV=production' };
  return { mode: defaultMode, because: defaultMode === 'development' ? 'the default without NODE_ENV=production' : 'the default' };
}

/** The line a start prints or logs first, so that no one runs a server in development mode unawares. */
export function webhookModeLine({ mode, because }: ReturnType<typeof webhookMode>, allowPrivate: boolean): string {
  if (mode === 'production') return `Webhooks: production mode (${because}): deliveries reach public https:// addresses only`;
  const local = allowPrivate
    ? 'deliveries may reach http:// and loopback receivers (WEBHOOK_ALLOW_PRIVATE=1)'
    : 'WEBHOOK_ALLOW_PRIVATE=1 would let deliveries reach http:// and loopback receivers';
  return `Webhooks: development mode (${because}): ${local}; on a server, set NODE_ENV=production or WEBHOOK_MODE=production`;
}

/**
 * Rules across the webhook variables, the mode decided by `webhookMode`. A process that cannot generate a key
 * of its own in development mode passes `requireKeyInProduction`.
 */
export function webhookConfigChecks(defaultMode: WebhookMode, options: { requireKeyInProduction?: boolean } = {}): ConfigurationCheck {
  return (env) => {
    const { mode, because } = webhookMode(env, defaultMode);
    if (mode !== 'production') return [];
    const problems: ConfigurationProblem[] = [];
    if (env.WEBHOOK_ALLOW_PRIVATE === '1') {
      problems.push({
        variable: 'WEBHOOK_ALLOW_PRIVATE',
        message: `1 is allowed only with WEBHOOK_MODE=development (local receivers on loopback); the mode is production (${because})`,
      });
    }
    if (options.requireKeyInProduction && !env.WEBHOOK_SECRET_KEY) {
      problems.push({
        variable: 'WEBHOOK_SECRET_KEY',
        message: `required in production mode (${SECRET_KEY_FORM}); set WEBHOOK_MODE=development to generate one under DATA_DIR`,
      });
    }
    return problems;
  };
}

/** The settings the service runs with; refuses private addresses outside development mode. */
export function webhookSettings(
  config: WebhookConfig & { NODE_ENV?: string | undefined },
  defaultMode: WebhookMode,
  secretKey: string,
): WebhookSettings {
  const { mode, because } = webhookMode(config, defaultMode);
  if (config.WEBHOOK_ALLOW_PRIVATE === '1' && mode !== 'development') {
    throw new Error(`WEBHOOK_ALLOW_PRIVATE=1 is allowed only with WEBHOOK_MODE=development; the mode is production (${because})`);
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
    streamReplayEvents: config.WEBHOOK_STREAM_REPLAY_EVENTS,
  };
}
