import {
  type BillingMessage,
  type Clock,
  DomainError,
  invalidRequest,
  type KeyUsageReport,
  microsToUsd,
  USAGE_DEFAULT_DAYS,
  USAGE_MAX_DAYS,
  type UsageReport,
} from '@oc/contracts';
import type { Filter, ReadModels } from '@oc/readmodel';
import { utcDay } from '../projections/billing-projections';
import {
  type ApiKeyDoc,
  Collections,
  type DailySpendDoc,
  type OrganizationDoc,
  type ProviderUsageTotalDoc,
  type ServedFigures,
} from '../projections/documents';
import { UsageCollections, type UsageDoc } from '../projections/usage';

const DAY_MS = 86_400_000;
/** Documents read per query of a scan: a page of the read model, never the whole window at once. */
const SCAN_BATCH = 2_000;
/**
 * Rows a report may sum before paging: beyond it the window or the grouping must narrow. A year of 250 keys each
 * using one model every day is 91,250 rows; what is kept per row is a few hundred bytes.
 */
const MAX_GROUPS = 100_000;
/** Key names looked up per query. */
const NAMES_BATCH = 500;

type Group = 'key' | 'model' | 'provider' | 'deployment' | 'day';

/** Figures found at one place: the read models' documents, and the rows they are summed into. */
interface Located extends ServedFigures {
  day: string;
  key_id?: string | null;
  model: string | null;
  provider: string | null;
  deployment: string | null;
}

/** Null (no key or model recorded) sorts before every name. */
const valueOf = (doc: Located, group: Group): string | null => (group === 'key' ? (doc.key_id ?? null) : doc[group]);

function compareValues(a: readonly (string | null)[], b: readonly (string | null)[]): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? null;
    const y = b[i] ?? null;
    if (x === y) continue;
    if (x === null) return -1;
    if (y === null) return 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

interface Row {
  values: (string | null)[];
  figures: ServedFigures;
}

/** Sums documents into one row per distinct value of the groups, refusing a report too large to hold. */
class Rows {
  private readonly rows = new Map<string, Row>();
  constructor(private readonly groups: readonly Group[]) {}

  add(doc: Located) {
    const values = this.groups.map((group) => valueOf(doc, group));
    const id = JSON.stringify(values);
    const row = this.rows.get(id);
    if (!row) {
      if (this.rows.size >= MAX_GROUPS) {
        throw invalidRequest(
          'usage_report_too_large',
          `Invalid 'start': this report would have more than ${MAX_GROUPS.toLocaleString('en-US')} rows; choose fewer days or group by fewer fields.`,
          'start',
        );
      }
      const { requests, input_tokens, output_tokens, seconds, revenue_micros, provider_cost_micros } = doc;
      this.rows.set(id, { values, figures: { requests, input_tokens, output_tokens, seconds, revenue_micros, provider_cost_micros } });
      return;
    }
    const f = row.figures;
    f.requests += doc.requests;
    f.input_tokens += doc.input_tokens;
    f.output_tokens += doc.output_tokens;
    f.seconds += doc.seconds;
    f.revenue_micros += doc.revenue_micros;
    f.provider_cost_micros += doc.provider_cost_micros;
  }

  /**
   * The rows after the cursor `after` (the group values of the previous page's last row), ordered by the groups,
   * at most `limit` of them; `next_after` names the last when more follow.
   */
  page(limit: number, after: string | undefined): { rows: Row[]; has_more: boolean; next_after: string | null } {
    const sorted = [...this.rows.values()].sort((a, b) => compareValues(a.values, b.values));
    const from = after === undefined ? 0 : firstAfter(sorted, decodeCursor(after, this.groups.length));
    const rows = sorted.slice(from, from + limit);
    const has_more = from + limit < sorted.length;
    return { rows, has_more, next_after: has_more ? encodeCursor(rows.at(-1)!.values) : null };
  }
}

function firstAfter(sorted: Row[], cursor: (string | null)[]): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (compareValues(sorted[mid]!.values, cursor) <= 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

const encodeCursor = (values: (string | null)[]) => Buffer.from(JSON.stringify(values)).toString('base64url');

function decodeCursor(after: string, length: number): (string | null)[] {
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(after, 'base64url').toString('utf8'));
  } catch {
    values = undefined;
  }
  if (!Array.isArray(values) || values.length !== length || !values.every((v) => v === null || typeof v === 'string')) {
    throw invalidRequest('invalid_cursor', "Invalid 'after': pass the next_after of the previous page of the same report.", 'after');
  }
  return values as (string | null)[];
}

const isCalendarDay = (day: string) => {
  const ms = Date.parse(day);
  return Number.isFinite(ms) && utcDay(ms) === day;
};

/** `start` to `end`, both included: the last 30 days by default, at most 366, each a day of the calendar. */
export function reportWindow(m: { start?: string | undefined; end?: string | undefined }, nowMs: number): { start: string; end: string } {
  for (const param of ['start', 'end'] as const) {
    const day = m[param];
    // The contract checks the shape only: 2026-02-30 has it.
    if (day !== undefined && !isCalendarDay(day)) {
      throw invalidRequest('invalid_parameter', `Invalid '${param}': ${day} is not a day of the calendar.`, param);
    }
  }
  const end = m.end ?? utcDay(nowMs);
  const start = m.start ?? utcDay(Date.parse(end) - (USAGE_DEFAULT_DAYS - 1) * DAY_MS);
  if (end < start) {
    // When only start was given, it is start that lies past today.
    const param = m.end === undefined ? 'start' : 'end';
    throw invalidRequest('invalid_parameter', `Invalid '${param}': end (${end}) is before start (${start}).`, param);
  }
  const days = (Date.parse(end) - Date.parse(start)) / DAY_MS + 1;
  if (days > USAGE_MAX_DAYS) {
    throw invalidRequest('invalid_parameter', `Invalid 'start': ${start} to ${end} is ${days} days; a report covers at most ${USAGE_MAX_DAYS}.`, 'start');
  }
  return { start, end };
}

/**
 * Usage reports, read from the read models captures build (`projections/usage.ts`, and the daily figures by
 * deployment), a batch of documents at a time: a report never reads the ledger.
 */
export class UsageReports {
  constructor(private readonly deps: { readModels: ReadModels; clock: Clock }) {}

  private async organization(orgId: string) {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: orgId });
    if (!org) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: orgId });
  }

  /** Every document of the window in (day, id) order, a batch at a time. */
  private async scan<T extends { _id: string; day: string; [key: string]: unknown }>(name: string, filter: Filter, each: (doc: T) => void) {
    const collection = this.deps.readModels.collection<T>(name);
    let after: unknown[] | undefined;
    for (;;) {
      const batch = await collection.find(filter, { sort: { day: 1, _id: 1 }, limit: SCAN_BATCH, ...(after ? { after } : {}) });
      batch.forEach(each);
      if (batch.length < SCAN_BATCH) return;
      const last = batch.at(-1)!;
      after = [last.day, last._id];
    }
  }

  /** The names of the organization's keys among `ids` (a key of another organization is never named). */
  private async keyNames(orgId: string | undefined, ids: Iterable<string | null>): Promise<Map<string, string>> {
    const wanted = [...new Set([...ids].filter((id): id is string => id !== null))];
    const names = new Map<string, string>();
    const keys = this.deps.readModels.collection<ApiKeyDoc>(Collections.apiKeys);
    for (let i = 0; i < wanted.length; i += NAMES_BATCH) {
      for (const key of await keys.find({ _id: { $in: wanted.slice(i, i + NAMES_BATCH) } })) {
        if (orgId === undefined || key.org_id === orgId) names.set(key._id, key.name);
      }
    }
    return names;
  }

  /** One organization's usage by key, model and day: what its members see. */
  async keyUsage(m: BillingMessage<'keyUsage'>): Promise<KeyUsageReport> {
    const { start, end } = reportWindow(m, this.deps.clock.now());
    await this.organization(m.org_id);
    const rows = new Rows(m.group_by);
    await this.scan<UsageDoc>(UsageCollections.usage, { org_id: m.org_id, day: { $gte: start, $lte: end } }, (doc) => rows.add(doc));
    const page = rows.page(m.limit, m.after);
    const keyAt = m.group_by.indexOf('key');
    const names = keyAt < 0 ? new Map<string, string>() : await this.keyNames(m.org_id, page.rows.map((row) => row.values[keyAt] ?? null));
    return {
      object: 'usage_report',
      organization_id: m.org_id,
      start,
      end,
      group_by: m.group_by,
      data: page.rows.map(({ values, figures }) => ({
        ...groupFields(m.group_by, values, names),
        requests: figures.requests,
        input_tokens: figures.input_tokens,
        output_tokens: figures.output_tokens,
        seconds: figures.seconds,
        spend: microsToUsd(figures.revenue_micros),
      })),
      currency: 'usd',
      has_more: page.has_more,
      next_after: page.next_after,
    };
  }

  /**
   * What paid requests used, earned and cost us, summed by the groups asked for, in their order; money is added
   * up in micro-USD and turned into USD once per row. Over every organization without a key, from the totals by
   * deployment (one document per day and deployment); by key, or for one organization, from its own documents.
   */
  async providerUsage(m: BillingMessage<'providerUsage'>): Promise<UsageReport> {
    const { start, end } = reportWindow(m, this.deps.clock.now());
    const day = { $gte: start, $lte: end };
    const rows = new Rows(m.group_by);
    if (m.org_id !== undefined) await this.organization(m.org_id);
    if (m.group_by.includes('key')) {
      await this.scan<UsageDoc>(UsageCollections.usage, m.org_id === undefined ? { day } : { org_id: m.org_id, day }, (doc) => rows.add(doc));
    } else if (m.org_id === undefined) {
      await this.scan<ProviderUsageTotalDoc>(Collections.providerUsageTotals, { day }, (doc) => rows.add(doc));
    } else {
      await this.scan<DailySpendDoc>(Collections.dailySpend, { org_id: m.org_id, day }, (d) => {
        for (const [key, figures] of Object.entries(d.served ?? {})) {
          const [model, provider, deployment] = JSON.parse(key) as [string, string, string];
          rows.add({ day: d.day, model, provider, deployment, ...figures });
        }
      });
    }
    const page = rows.page(m.limit, m.after);
    const keyAt = m.group_by.indexOf('key');
    const names = keyAt < 0 ? new Map<string, string>() : await this.keyNames(m.org_id, page.rows.map((row) => row.values[keyAt] ?? null));
    return {
      object: 'usage_report',
      start,
      end,
      group_by: m.group_by,
      data: page.rows.map(({ values, figures }) => ({
        ...groupFields(m.group_by, values, names),
        requests: figures.requests,
        input_tokens: figures.input_tokens,
        output_tokens: figures.output_tokens,
        seconds: figures.seconds,
        revenue: microsToUsd(figures.revenue_micros),
        provider_cost: microsToUsd(figures.provider_cost_micros),
        margin: microsToUsd(figures.revenue_micros - figures.provider_cost_micros),
      })),
      has_more: page.has_more,
      next_after: page.next_after,
    };
  }
}

interface GroupFields {
  key_id?: string | null;
  key_name?: string | null;
  model?: string | null;
  provider?: string | null;
  deployment?: string | null;
  day?: string;
}

/** A row's group fields: `key` as the key's id and name, the others under their own names. */
function groupFields(groups: readonly Group[], values: (string | null)[], names: Map<string, string>): GroupFields {
  const fields: GroupFields = {};
  groups.forEach((group, i) => {
    const value = values[i] ?? null;
    if (group === 'key') {
      fields.key_id = value;
      fields.key_name = value === null ? null : (names.get(value) ?? null);
    } else if (group === 'day') {
      // Every document has its day.
      if (value !== null) fields.day = value;
    } else {
      fields[group] = value;
    }
  });
  return fields;
}
