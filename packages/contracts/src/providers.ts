import { z } from 'zod';

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

const Day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a UTC day, YYYY-MM-DD');
export const USAGE_GROUPS = ['model', 'provider', 'deployment', 'day'] as const;

/**
 * GET /admin/v1/usage: what paid requests used, earned and cost us, from `start` to `end` (UTC days, both
 * included; the last 30 days by default, at most 366), grouped by any of model, provider, deployment and day.
 */
export const UsageQuery = z
  .object({
    start: Day.optional(),
    end: Day.optional(),
    group_by: z
      .string()
      .default('model,provider')
      .transform((v, ctx) => {
        const groups = v.split(',').map((g) => g.trim()).filter(Boolean);
        for (const g of groups) {
          if (!(USAGE_GROUPS as readonly string[]).includes(g)) {
            ctx.addIssue({ code: 'custom', message: `group_by takes ${USAGE_GROUPS.join(', ')}, separated by commas; not '${g}'` });
            return z.NEVER;
          }
        }
        return [...new Set(groups)] as Array<(typeof USAGE_GROUPS)[number]>;
      }),
    /** One organization's usage only. */
    org_id: z.string().min(1).max(100).optional(),
  })
  .strict();

export const UsageRowSchema = z.object({
  model: z.string().optional(),
  provider: z.string().optional(),
  deployment: z.string().optional(),
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
  start: Day,
  end: Day,
  group_by: z.array(z.enum(USAGE_GROUPS)),
  data: z.array(UsageRowSchema),
});
export type UsageReport = z.infer<typeof UsageReportSchema>;
