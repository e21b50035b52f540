import {
  type ConsolePrincipal,
  ConsoleUsageQuery,
  type KeyUsageReport,
  KeyUsageReportSchema,
  parseOrThrow,
  Subjects,
  unwrap,
  UsageQuery,
  type UsageReport,
  UsageReportSchema,
} from '@oc/contracts';
import { csvRecord } from './csv';
import type { Route, RouteContext } from './routes';

type Member = Extract<ConsolePrincipal, { kind: 'member' }>;
type Report = UsageReport | KeyUsageReport;
type Row = Report['data'][number];

/** Each group's columns: a key by its id and its name, so that a renamed or unnamed key still reads. */
const GROUP_COLUMNS: Record<string, string[]> = {
  key: ['key_id', 'key_name'],
  model: ['model'],
  provider: ['provider'],
  deployment: ['deployment'],
  day: ['day'],
};

/**
 * A report's page as CSV: a header row, then a row per group with money in USD (`spend_usd`, or the admin's
 * `revenue_usd`, `provider_cost_usd`, `margin_usd`). When more rows follow, `Link` names the next page (RFC 8288).
 */
function sendCsv<P>(ctx: RouteContext<P>, report: Report, figures: Array<[column: string, value: (row: Row) => number]>, name: string): void {
  const { res } = ctx;
  const groups = report.group_by.flatMap((group) => GROUP_COLUMNS[group]!);
  const lines = [csvRecord([...groups, ...figures.map(([column]) => column)])];
  for (const row of report.data) {
    const cells = row as Record<string, string | number | null | undefined>;
    lines.push(csvRecord([...groups.map((column) => cells[column]), ...figures.map(([, value]) => value(row))]));
  }
  res.statusCode = 200;
  res.setHeader('Content-Type', 'text/csv; charset=utf-8');
  res.setHeader('Content-Disposition', `attachment; filename="${name}-${report.start}-${report.end}.csv"`);
  if (report.has_more && report.next_after !== null) {
    // Under the console's Express mount `url` lost its `/console/v1`; `originalUrl` keeps it.
    const next = new URL((ctx.req as { originalUrl?: string }).originalUrl ?? ctx.req.url ?? '/', 'http://gateway');
    next.searchParams.set('after', report.next_after);
    res.setHeader('Link', `<${next.pathname}${next.search}>; rel="next"`);
  }
  res.end(lines.join(''));
}

const COUNTS: Array<[string, (row: Row) => number]> = [
  ['requests', (row) => row.requests],
  ['input_tokens', (row) => row.input_tokens],
  ['output_tokens', (row) => row.output_tokens],
  ['seconds', (row) => row.seconds],
];

/** `GET /admin/v1/usage`: every organization's usage, or one's (`org_id`), also by key, as JSON or CSV. */
export const adminUsageRoute: Route<'admin'> = {
  method: 'GET',
  path: '/admin/v1/usage',
  scope: null,
  doc: {
    summary:
      'What paid requests used, earned and cost us per API key, model, provider, deployment or UTC day (the last 30 days by default); format=csv answers CSV',
    query: UsageQuery,
    response: UsageReportSchema,
    media: ['text/csv'],
    // An org_id that names no organization.
    errors: [404],
  },
  handle: async (ctx) => {
    const { format, ...query } = parseOrThrow(UsageQuery, ctx.query);
    const report = unwrap(await ctx.services.request<UsageReport>(Subjects.billing.providerUsage, query, { headers: ctx.headers }));
    if (format === 'json') return { ok: true, data: report };
    const money: Array<[string, (row: Row) => number]> = [
      ['revenue_usd', (row) => (row as UsageReport['data'][number]).revenue],
      ['provider_cost_usd', (row) => (row as UsageReport['data'][number]).provider_cost],
      ['margin_usd', (row) => (row as UsageReport['data'][number]).margin],
    ];
    return sendCsv(ctx, report, [...COUNTS, ...money], query.org_id === undefined ? 'usage' : `usage-${query.org_id}`);
  },
};

/**
 * `GET /console/v1/usage`: the member's own organization's usage by key, model and day, as JSON or CSV. The
 * organization is the session's, never a parameter, so no member can ask for another's.
 */
export const consoleUsageRoute: Route<ConsolePrincipal> = {
  method: 'GET',
  path: '/console/v1/usage',
  scope: null,
  doc: {
    summary: "Your organization's spend, tokens, seconds of video and paid requests by API key, model or UTC day; format=csv answers CSV",
    query: ConsoleUsageQuery,
    response: KeyUsageReportSchema,
    media: ['text/csv'],
  },
  handle: async (ctx) => {
    const { format, ...query } = parseOrThrow(ConsoleUsageQuery, ctx.query);
    const orgId = (ctx.principal as Member).organization.id;
    const report = unwrap(await ctx.services.request<KeyUsageReport>(Subjects.billing.keyUsage, { ...query, org_id: orgId }, { headers: ctx.headers }));
    if (format === 'json') return { ok: true, data: report };
    return sendCsv(ctx, report, [...COUNTS, ['spend_usd', (row) => (row as KeyUsageReport['data'][number]).spend]], `usage-${orgId}`);
  },
};
