import { type ConfigurationCheck, VIDEO_MODELS } from '@oc/contracts';
import { ProviderEnvSchema } from '@oc/routing';
import { z } from 'zod';
import { DEFAULT_PRICES, PriceTableSchema } from './domain/pricing';

const json = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not valid JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);

const ms = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const MINUTE = 60_000;

/** The video service's settings (its own process, and the standalone's share of the environment). */
export const VideoConfigSchema = ProviderEnvSchema.pick({
  GEMINI_API_KEY: true,
  GEMINI_BASE_URL: true,
  FAL_KEY: true,
  FAL_BASE_URL: true,
  REPLICATE_API_TOKEN: true,
  REPLICATE_BASE_URL: true,
}).extend({
  /** Base of the absolute `url` values; the standalone defaults it to the address it listens on. */
  PUBLIC_BASE_URL: z.url().optional(),
  /**
   * The public or CDN address in front of the permanent store (e.g. a CDN over the S3 bucket): a persisted
   * video's `url` is this plus its object key. Unset, the `url` stays the content endpoint.
   */
  VIDEO_PUBLIC_BASE_URL: z.url().optional().describe('an http(s) URL; the object key (<org_id>/<video_id>.mp4) is appended'),
  /** The model catalog (YAML or JSON); without it, every provider whose key is set serves the video models (docs/providers.md). */
  MODELS_FILE: z.string().min(1).optional(),
  /** The one OpenAI-compatible upstream of earlier releases: kept, as one deployment named `openai`. Test keys always use the simulator. */
  VIDEO_PROVIDER: z.enum(['simulator', 'openai']).default('simulator'),
  VIDEO_UPSTREAM_BASE_URL: z.url().default('https://api.openai.com/v1'),
  VIDEO_UPSTREAM_API_KEY: z.string().optional(),
  VIDEO_UPSTREAM_MODELS: json(z.record(z.enum(VIDEO_MODELS), z.string().min(1))).default({
    'video-2': 'sora-2',
    'video-2-pro': 'sora-2-pro',
  }),
  /** How often a running job is polled at its provider (unless its catalog entry says): no faster than the providers' guidance of 5 s. */
  VIDEO_UPSTREAM_POLL_MS: ms(5_000),
  /** 0: a simulated job completes in the step that starts it. */
  SIM_VIDEO_DURATION_MS: z.coerce.number().int().nonnegative().default(20_000),
  SIM_VIDEO_POLL_MS: ms(1_000),
  /** 1: render every clip size and length ahead, in the background at start (those not on disk yet). */
  SIM_VIDEO_PRERENDER: z.enum(['0', '1']).default('1'),
  VIDEO_JOB_TIMEOUT_MS: ms(10 * MINUTE),
  VIDEO_PERSIST_AFTER_MS: ms(45 * MINUTE),
  VIDEO_TEMP_TTL_MS: ms(60 * MINUTE),
  VIDEO_RETRY_MS: ms(5_000),
  /** Permanent storage on S3 or a compatible store (MinIO) when a bucket is set; a local directory otherwise. */
  VIDEO_S3_BUCKET: z.string().min(1).optional(),
  VIDEO_S3_ENDPOINT: z.url().optional(),
  VIDEO_S3_REGION: z.string().default('us-east-1'),
  VIDEO_S3_ACCESS_KEY_ID: z.string().optional(),
  VIDEO_S3_SECRET_ACCESS_KEY: z.string().optional(),
  VIDEO_S3_FORCE_PATH_STYLE: z.enum(['0', '1']).default('1'),
  /**
   * With S3 and no VIDEO_PUBLIC_BASE_URL: a persisted video's `url` is a presigned GET of its object, signed
   * on each read, valid this many seconds (SigV4 allows 7 days at most). Only for a store clients can reach;
   * unset, the `url` is the permanent content path of the API.
   */
  VIDEO_S3_SIGNED_URL_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(604_800)
    .optional()
    .describe('seconds, 60 to 604800 (7 days)'),
  /** USD per second by model and size, e.g. `{"video-2":{"1280x720":0.1,...},...}`. */
  VIDEO_PRICES: json(PriceTableSchema).default(DEFAULT_PRICES),
});
export type VideoConfig = z.infer<typeof VideoConfigSchema>;

/** Rules across the video variables. */
export const videoConfigChecks: ConfigurationCheck = (env) =>
  env.VIDEO_PROVIDER === 'openai' && !env.VIDEO_UPSTREAM_API_KEY
    ? [{ variable: 'VIDEO_UPSTREAM_API_KEY', message: 'required when VIDEO_PROVIDER=openai (the upstream Videos API key)' }]
    : [];
