import { z } from 'zod';

/** A UTC day, as usage reports take and answer them. */
export const UsageDay = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a UTC day, YYYY-MM-DD');

/** The days a usage report covers when it names no start. */
export const USAGE_DEFAULT_DAYS = 30;
/** The longest usage report, in days: a year, leap years included. */
export const USAGE_MAX_DAYS = 366;
/** Rows one answer carries at most; `after` pages on. */
export const USAGE_MAX_ROWS = 10_000;

/** `group_by` as a comma-separated list of `groups`, each named once, in the order given. */
export function groupList<const G extends readonly string[]>(groups: G, byDefault: string) {
  return z
    .string()
    .max(200)
    .default(byDefault)
    .transform((v, ctx) => {
      const named = v.split(',').map((g) => g.trim()).filter(Boolean);
      for (const g of named) {
        if (!(groups as readonly string[]).includes(g)) {
          ctx.addIssue({ code: 'custom', message: `group_by takes ${groups.join(', ')}, separated by commas; not '${g}'` });
          return z.NEVER;
        }
      }
      return [...new Set(named)] as Array<G[number]>;
    });
}

/** The days of a usage report, both included. */
export const UsageWindowFields = { start: UsageDay.optional(), end: UsageDay.optional() };

/**
 * The page and the answer's format of a usage report. `after` is the `next_after` of the page before;
 * `format=csv` answers the same rows as CSV (a header row, money in USD), which a link can ask for where it
 * cannot set `Accept`.
 */
export const UsagePageFields = {
  limit: z.coerce.number().int().min(1).max(USAGE_MAX_ROWS).default(1_000),
  after: z.string().min(1).max(2_000).optional(),
  format: z.enum(['json', 'csv']).default('json'),
};

/** What a member's usage report can be grouped by: the organization's API keys, the public models, UTC days. */
export const KEY_USAGE_GROUPS = ['key', 'model', 'day'] as const;
export type KeyUsageGroup = (typeof KEY_USAGE_GROUPS)[number];

/**
 * GET /console/v1/usage: what the organization's paid requests used and were charged from `start` to `end`
 * (UTC days, both included; the last 30 days by default, at most 366), grouped by key, model and/or day.
 */
export const ConsoleUsageQuery = z.object({ ...UsageWindowFields, group_by: groupList(KEY_USAGE_GROUPS, 'day'), ...UsagePageFields }).strict();

export const KeyUsageRowSchema = z.object({
  /** Grouped by key: the key that made the requests; null for charges recorded before captures named their key. */
  key_id: z.string().nullable().optional(),
  /** The key's name, null when the key is not one of the organization's API keys (or is unknown). */
  key_name: z.string().nullable().optional(),
  /** Grouped by model: the public model; null for charges recorded without what served them. */
  model: z.string().nullable().optional(),
  day: z.string().optional(),
  /** Paid requests: each charge is one. */
  requests: z.int().nonnegative(),
  input_tokens: z.int().nonnegative(),
  output_tokens: z.int().nonnegative(),
  /** Seconds of video generated. */
  seconds: z.int().nonnegative(),
  /** USD charged. */
  spend: z.number(),
});
export type KeyUsageRow = z.infer<typeof KeyUsageRowSchema>;

export const KeyUsageReportSchema = z.object({
  object: z.literal('usage_report'),
  organization_id: z.string(),
  start: UsageDay,
  end: UsageDay,
  group_by: z.array(z.enum(KEY_USAGE_GROUPS)),
  /** Ordered by the groups, in `group_by`'s order. */
  data: z.array(KeyUsageRowSchema),
  currency: z.literal('usd'),
  has_more: z.boolean(),
  /** Pass as `after` for the next page; null on the last. */
  next_after: z.string().nullable(),
});
export type KeyUsageReport = z.infer<typeof KeyUsageReportSchema>;
