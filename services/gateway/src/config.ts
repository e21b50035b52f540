import { z } from 'zod';
import { DEFAULT_REDIS_KEY_PREFIX } from './application/rate-limits';
import { DEFAULT_CHAT_IN_FLIGHT_PER_ORGANIZATION } from './transport/chat-routes';
import { DEFAULT_AUTH_FAILURES_PER_MINUTE } from './domain/limits';

/** Where gateways share their counters (rate limits, failed authentications), for the gateway's process and the standalone one. */
export const RedisConfigSchema = z.object({
  REDIS_URL: z.string().url().optional(),
  /** Begins every key the gateway writes, so that deployments sharing one Redis never count each other's requests. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[!-~]{1,64}$/)
    .default(DEFAULT_REDIS_KEY_PREFIX)
    .describe('1 to 64 printable characters without spaces, e.g. oc-staging:'),
});

/** The gateway's limits beyond HTTP's, shared by its own process and the standalone one (README's table). */
export const GatewayLimitsConfigSchema = z.object({
  /** Completions one organization may have running at once on one gateway; more are refused with 429. */
  CHAT_MAX_IN_FLIGHT_PER_ORG: z.coerce.number().int().positive().default(DEFAULT_CHAT_IN_FLIGHT_PER_ORGANIZATION),
  /** Failed authentications one client address may make per minute before it is answered 429 without a key lookup. */
  AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().positive().default(DEFAULT_AUTH_FAILURES_PER_MINUTE),
  /**
   * `Secure` on the console's session cookie: 1 always, 0 never. Unset: on, except for a browser that came over
   * plain http to a loopback name (a developer's machine), in either run mode.
   */
  CONSOLE_COOKIE_SECURE: z.enum(['0', '1']).optional().describe('0 or 1'),
});

/** `CONSOLE_COOKIE_SECURE` as the gateway takes it: undefined leaves it to each request. */
export const cookieSecure = (setting: '0' | '1' | undefined) => (setting === undefined ? undefined : setting === '1');
