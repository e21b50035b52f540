import { z } from 'zod';
import { UsageDay } from './usage';

/**
 * The activity log: an organization's paid requests, one row per reservation a product made (a chat or text
 * completion, a response, a video), from the hold to its settlement.
 *
 * `held` while the work runs; `charged` once captured; `released` when given back uncharged (failed, cancelled,
 * or refused upstream); `expired` when billing released it because its product neither charged nor released it in time.
 */
export const ACTIVITY_STATUSES = ['held', 'charged', 'released', 'expired'] as const;
export type ActivityStatus = (typeof ACTIVITY_STATUSES)[number];

/** A UTC day that exists: `2026-02-30` is refused, not read as March. */
const CalendarDay = UsageDay.refine((day) => {
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(ms) && new Date(ms).toISOString().startsWith(day);
}, 'not a day of the calendar');

/** Rows one page of the activity log carries at most. */
export const ACTIVITY_MAX_LIMIT = 100;

/**
 * GET /console/v1/activity and GET /admin/v1/organizations/{org_id}/activity: newest first, each filter narrowing
 * the rows; `start` and `end` are UTC days, both included; `after` is the `id` of the previous page's last row.
 */
export const ActivityQuery = z
  .object({
    key_id: z.string().min(1).max(100).optional(),
    model: z.string().min(1).max(100).optional(),
    status: z.enum(ACTIVITY_STATUSES).optional(),
    start: CalendarDay.optional(),
    end: CalendarDay.optional(),
    limit: z.coerce.number().int().min(1).max(ACTIVITY_MAX_LIMIT).default(20),
    after: z.string().min(1).max(200).optional(),
  })
  .strict()
  .refine((q) => q.start === undefined || q.end === undefined || q.start <= q.end, { message: 'end is before start', path: ['end'] });
export type ActivityQuery = z.infer<typeof ActivityQuery>;

export const ActivityEntrySchema = z.object({
  /** The resource the request made: a completion's id (`chatcmpl_…`, `cmpl_…`; a response's is its completion's), a video's. */
  id: z.string(),
  object: z.literal('activity'),
  /** Null for work of no API key (the console's own) and for requests recorded before reservations named their key. */
  key_id: z.string().nullable(),
  /** The public model, as the charge recorded it; null until then, and for requests never charged. */
  model: z.string().nullable(),
  product: z.enum(['chat', 'text', 'video']).nullable(),
  status: z.enum(ACTIVITY_STATUSES),
  description: z.string(),
  /** USD held when the request started. */
  amount_held: z.number(),
  /** USD charged; 0 unless `charged`. */
  amount_charged: z.number(),
  input_tokens: z.int().nullable(),
  output_tokens: z.int().nullable(),
  /** Seconds of video generated. */
  seconds: z.int().nullable(),
  created: z.int(),
  /** When it was charged, released or expired; null while held. */
  settled_at: z.int().nullable(),
});
export type ActivityEntry = z.infer<typeof ActivityEntrySchema>;

export const ActivityListSchema = z.object({ object: z.literal('list'), data: z.array(ActivityEntrySchema), has_more: z.boolean() });
export type ActivityList = z.infer<typeof ActivityListSchema>;

/** Billing's subject for the log (apart from `Subjects.billing`, so that this feature's files stay its own). */
export const ActivitySubjects = { listActivity: 'billing.activity.list' } as const;

export const ActivityMessages = {
  listActivity: z.object({
    org_id: z.string().min(1),
    key_id: z.string().optional(),
    model: z.string().optional(),
    status: z.enum(ACTIVITY_STATUSES).optional(),
    start: CalendarDay.optional(),
    end: CalendarDay.optional(),
    limit: z.int().min(1).max(ACTIVITY_MAX_LIMIT),
    after: z.string().optional(),
  }),
} as const;
export type ActivityMessage<K extends keyof typeof ActivityMessages> = z.infer<(typeof ActivityMessages)[K]>;
