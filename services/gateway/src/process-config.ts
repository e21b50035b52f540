import { NatsPrefixSchema, NatsUrlSchema, ShutdownConfigSchema } from '@oc/contracts';
import { TelemetryConfigSchema } from '@oc/telemetry';
import { z } from 'zod';
import { GatewayLimitsConfigSchema, RedisConfigSchema } from './config';
import { HttpServerConfigSchema } from './transport/http-server';

/** The gateway process's environment, as main.ts parses it at boot (and the deployment files are checked against). */
export const gatewayProcessConfig = z.object({
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080).describe('a TCP port, 0 to 65535'),
  HOST: z.string().default('0.0.0.0'),
  NATS_URL: NatsUrlSchema,
  NATS_PREFIX: NatsPrefixSchema,
  ADMIN_TOKEN: z.string().min(16).describe('the operator token for /admin/v1, at least 16 characters'),
  ...RedisConfigSchema.shape,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  KEY_USAGE_FLUSH_MS: z.coerce.number().int().positive().default(10_000),
  /** The model catalog the chat and video services route by: its models of the operator's own join GET /v1/models. */
  MODELS_FILE: z.string().min(1).optional(),
  ...HttpServerConfigSchema.shape,
  ...ShutdownConfigSchema.shape,
  ...GatewayLimitsConfigSchema.shape,
  ...TelemetryConfigSchema.shape,
});
