import { z } from 'zod';
import { groupList, UsageDay, UsagePageFields, UsageWindowFields } from './usage';

/** One deployment as this replica's router sees it (GET /admin/v1/providers). */
export const DeploymentStatusSchema = z.object({
  object: z.literal('deployment'),
  /** The public model it serves. */
  model: z.string(),
  id: z.string(),
  provider: z.string(),
  upstream_model: z.string(),
  /** `closed`: in use; `open`: skipped after failures until its cool-down ends; `half_open`: one trial call at a time. */
  circuit: z.enum(['closed', 'open', 'half_open']),
  /** Share of the last calls (up to 1,000) that succeeded; null before any. */
  success_rate: z.number().min(0).max(1).nullable(),
  calls: z.int().nonnegative(),
  failures: z.int().nonnegative(),
  /** Chat: to the first byte of the answer; video: to the provider's acceptance of the job. */
  latency_ms: z.object({ p50: z.number().nullable(), p99: z.number().nullable() }),
  in_flight: z.int().nonnegative(),
  /** Unix seconds until which the provider asked us to wait (its Retry-After), when it did. */
  retry_after_until: z.int().nullable(),
});
export type DeploymentStatus = z.infer<typeof DeploymentStatusSchema>;

export const DeploymentStatusListSchema = z.object({ object: z.literal('list'), data: z.array(DeploymentStatusSchema) });
export type DeploymentStatusList = z.infer<typeof DeploymentStatusListSchema>;

export const USAGE_GROUPS = ['key', 'model', 'provider', 'deployment', 'day'] as const;

/**
 * GET /admin/v1/usage: what paid requests used, earned and cost us, from `start` to `end` (UTC days, both
 * included; the last 30 days by default, at most 366), grouped by any of key, model, provider, deployment and day,
 * a page of rows at a time (`limit`, `after`), as JSON or CSV (`format`).
 */
export const UsageQuery = z
  .object({
    ...UsageWindowFields,
    group_by: groupList(USAGE_GROUPS, 'model,provider'),
    /** One organization's usage only. */
    org_id: z.string().min(1).max(100).optional(),
    ...UsagePageFields,
  })
  .strict();

export const UsageRowSchema = z.object({
  /** Grouped by key: the API key that made the requests; null for captures recorded before they named their key. */
  key_id: z.string().nullable().optional(),
  /** The key's name; null when no API key has that id. */
  key_name: z.string().nullable().optional(),
  /** Null for captures recorded without what served them (grouped by key only). */
  model: z.string().nullable().optional(),
  provider: z.string().nullable().optional(),
  deployment: z.string().nullable().optional(),
  day: z.string().optional(),
  requests: z.int().nonnegative(),
  input_tokens: z.int().nonnegative(),
  output_tokens: z.int().nonnegative(),
  seconds: z.int().nonnegative(),
  /** USD charged to customers. */
  revenue: z.number(),
  /** USD the providers charge us, by the catalog's prices. */
  provider_cost: z.number(),
  /** revenue − provider_cost, USD. */
  margin: z.number(),
});

export const UsageReportSchema = z.object({
  object: z.literal('usage_report'),
  start: UsageDay,
  end: UsageDay,
  group_by: z.array(z.enum(USAGE_GROUPS)),
  data: z.array(UsageRowSchema),
  has_more: z.boolean(),
  /** Pass as `after` for the next page; null on the last. */
  next_after: z.string().nullable(),
});
export type UsageReport = z.infer<typeof UsageReportSchema>;
