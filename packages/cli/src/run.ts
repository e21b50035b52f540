import { parseArgs } from 'node:util';
import type { ApiKey, Balance, CreatedApiKey, LedgerEntry, LimitName, Organization } from '@oc/contracts';

export interface Io {
  fetch: typeof globalThis.fetch;
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: Record<string, string | undefined>;
}

interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
}

const DEFAULT_URL = 'http://127.0.0.1:8080';

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  limit: { type: 'string' },
  after: { type: 'string' },
  name: { type: 'string' },
  tier: { type: 'string' },
  description: { type: 'string' },
  scope: { type: 'string', multiple: true },
  'rate-limit': { type: 'string' },
  'expires-in-days': { type: 'string' },
  test: { type: 'boolean' },
  'requests-per-minute': { type: 'string' },
  'requests-per-day': { type: 'string' },
  'chat-requests-per-minute': { type: 'string' },
  'chat-tokens-per-day': { type: 'string' },
} as const;

/** `oc orgs set-limits` options, each naming one figure of the organization's `limits`. */
const LIMIT_OPTIONS = {
  'requests-per-minute': 'requests_per_minute',
  'requests-per-day': 'requests_per_day',
  'chat-requests-per-minute': 'chat_requests_per_minute',
  'chat-tokens-per-day': 'chat_tokens_per_day',
} as const satisfies Record<string, LimitName>;

const GLOBAL_OPTIONS = ['url', 'token', 'json', 'help'] as const;

const parse = (args: string[]) => parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
type Values = ReturnType<typeof parse>['values'];
type Api = <T>(method: string, path: string, body?: unknown) => Promise<T>;
type Print = (body: unknown, human: () => string) => void;

interface Command {
  usage: string;
  words: string[];
  args: number;
  options?: (keyof typeof OPTIONS)[];
  exec(ctx: { api: Api; print: Print; io: Io; json: boolean }, args: string[], values: Values): Promise<void>;
}

/** Bad invocation: exit code 2 with the usage. */
class UsageError extends Error {}
/** The call failed (API error, unreachable service): exit code 1. */
class CliError extends Error {}

const orgPath = (orgId: string) => `/admin/v1/organizations/${encodeURIComponent(orgId)}`;

const COMMANDS: Command[] = [
  {
    usage: 'oc orgs list [--limit N] [--after ORG_ID]',
    words: ['orgs', 'list'],
    args: 0,
    options: ['limit', 'after'],
    async exec({ api, print }, _, values) {
      const list = await api<List<Organization>>('GET', `/admin/v1/organizations${page(values)}`);
      print(list, () =>
        listText(list, 'no organizations', ['ID', 'NAME', 'TIER', 'CREATED'], (o) => [o.id, o.name, o.tier, time(o.created)]),
      );
    },
  },
  {
    usage: 'oc orgs create --name NAME [--tier free|standard|premium|enterprise]',
    words: ['orgs', 'create'],
    args: 0,
    options: ['name', 'tier'],
    async exec({ api, print }, _, values) {
      const org = await api<Organization>('POST', '/admin/v1/organizations', {
        name: required(values.name, '--name'),
        tier: values.tier,
      });
      print(org, () => organizationText(org));
    },
  },
  {
    usage: 'oc orgs get ORG_ID',
    words: ['orgs', 'get'],
    args: 1,
    async exec({ api, print }, [orgId]) {
      const org = await api<Organization>('GET', orgPath(orgId!));
      print(org, () => organizationText(org));
    },
  },
  {
    usage: 'oc orgs set-tier ORG_ID TIER',
    words: ['orgs', 'set-tier'],
    args: 2,
    async exec({ api, print }, [orgId, tier]) {
      const org = await api<Organization>('PATCH', orgPath(orgId!), { tier });
      print(org, () => organizationText(org));
    },
  },
  {
    usage:
      'oc orgs set-limits ORG_ID [--requests-per-minute N|default] [--requests-per-day N|default] [--chat-requests-per-minute N|default] [--chat-tokens-per-day N|default]  (enterprise only)',
    words: ['orgs', 'set-limits'],
    args: 1,
    options: Object.keys(LIMIT_OPTIONS) as (keyof typeof LIMIT_OPTIONS)[],
    async exec({ api, print }, [orgId], values) {
      const limits: Partial<Record<LimitName, number | null>> = {};
      for (const [option, name] of Object.entries(LIMIT_OPTIONS) as [keyof typeof LIMIT_OPTIONS, LimitName][]) {
        const value = values[option];
        // `default` gives the figure back to the tier (null in the API).
        if (value !== undefined) limits[name] = value === 'default' ? null : integer(value, `--${option}`)!;
      }
      if (Object.keys(limits).length === 0) throw new UsageError('name at least one limit to set');
      const org = await api<Organization>('PATCH', orgPath(orgId!), { limits });
      print(org, () => organizationText(org));
    },
  },
  {
    usage: 'oc credit ORG_ID AMOUNT_USD [--description TEXT]',
    words: ['credit'],
    args: 2,
    options: ['description'],
    async exec({ api, print }, [orgId, amount], values) {
      const usd = Number(amount);
      if (amount!.trim() === '' || !Number.isFinite(usd)) throw new UsageError(`AMOUNT_USD must be a number, got "${amount}"`);
      const balance = await api<Balance>('POST', `${orgPath(orgId!)}/credits`, {
        amount: usd,
        description: values.description,
      });
      print(balance, () => balanceText(balance));
    },
  },
  {
    usage: 'oc balance ORG_ID',
    words: ['balance'],
    args: 1,
    async exec({ api, print }, [orgId]) {
      const balance = await api<Balance>('GET', `${orgPath(orgId!)}/balance`);
      print(balance, () => balanceText(balance));
    },
  },
  {
    usage: 'oc ledger ORG_ID [--limit N] [--after ENTRY_ID]',
    words: ['ledger'],
    args: 1,
    options: ['limit', 'after'],
    async exec({ api, print }, [orgId], values) {
      const list = await api<List<LedgerEntry>>('GET', `${orgPath(orgId!)}/ledger${page(values)}`);
      print(list, () =>
        listText(list, 'no ledger entries', ['ID', 'TYPE', 'AMOUNT', 'AVAILABLE_AFTER', 'CREATED', 'DESCRIPTION', 'REFERENCE'], (e) => [
          e.id,
          e.type,
          usd(e.amount),
          usd(e.available_after),
          time(e.created),
          e.description,
          e.reference ?? '-',
        ]),
      );
    },
  },
  {
    usage: 'oc keys list ORG_ID',
    words: ['keys', 'list'],
    args: 1,
    async exec({ api, print }, [orgId]) {
      const list = await api<List<ApiKey>>('GET', `${orgPath(orgId!)}/keys`);
      print(list, () =>
        listText(
          list,
          'no API keys',
          ['ID', 'NAME', 'MODE', 'PREFIX', 'SCOPES', 'RATE/MIN', 'REQUESTS', 'LAST_USED', 'EXPIRES', 'STATUS'],
          (k) => [
            k.id,
            k.name,
            k.mode,
            k.prefix,
            k.scopes.join(','),
            String(k.rate_limit_per_minute),
            String(k.usage.requests),
            time(k.last_used_at),
            time(k.expires_at),
            keyStatus(k),
          ],
        ),
      );
    },
  },
  {
    usage:
      'oc keys create ORG_ID --name NAME --scope SCOPE [--scope SCOPE ...] [--rate-limit N] [--expires-in-days N] [--test]',
    words: ['keys', 'create'],
    args: 1,
    options: ['name', 'scope', 'rate-limit', 'expires-in-days', 'test'],
    async exec({ api, print, io, json }, [orgId], values) {
      const name = required(values.name, '--name');
      if (!values.scope?.length) throw new UsageError('at least one --scope is required');
      const key = await api<CreatedApiKey>('POST', `${orgPath(orgId!)}/keys`, {
        name,
        scopes: values.scope,
        rate_limit_per_minute: integer(values['rate-limit'], '--rate-limit'),
        expires_in_days: integer(values['expires-in-days'], '--expires-in-days'),
        mode: values.test ? 'test' : 'live',
      });
      // In --json mode stdout must stay pure JSON for scripts, so the warning goes to stderr.
      if (json) io.stderr.write(`${KEY_WARNING}\n`);
      print(key, () =>
        [
          `Created ${key.mode} key ${key.id} "${key.name}" for ${orgId}`,
          fields([
            ['scopes', key.scopes.join(', ')],
            ['rate limit', `${key.rate_limit_per_minute}/minute`],
            ['expires', time(key.expires_at)],
          ]),
          '',
          `    ${key.key}`,
          '',
          KEY_WARNING,
        ].join('\n'),
      );
    },
  },
  {
    usage: 'oc keys revoke ORG_ID KEY_ID',
    words: ['keys', 'revoke'],
    args: 2,
    async exec({ api, print }, [orgId, keyId]) {
      const body = await api<ApiKey | undefined>('DELETE', `${orgPath(orgId!)}/keys/${encodeURIComponent(keyId!)}`);
      print(body, () => `Revoked key ${keyId}${body?.revoked_at ? ` at ${time(body.revoked_at)}` : ''}`);
    },
  },
  {
    usage: 'oc usage ORG_ID',
    words: ['usage'],
    args: 1,
    async exec({ api, print }, [orgId]) {
      const keys = await api<List<ApiKey>>('GET', `${orgPath(orgId!)}/keys`);
      const balance = await api<Balance>('GET', `${orgPath(orgId!)}/balance`);
      const total = keys.data.reduce((sum, k) => sum + k.usage.requests, 0);
      print({ keys, balance }, () =>
        [
          listText(keys, 'no API keys', ['KEY', 'NAME', 'STATUS', 'REQUESTS', 'LAST_USED'], (k) => [
            k.id,
            k.name,
            keyStatus(k),
            String(k.usage.requests),
            time(k.last_used_at),
          ]),
          '',
          fields([['total requests', String(total)], ...balanceRows(balance)]),
        ].join('\n'),
      );
    },
  },
];

const KEY_WARNING = 'Store this key now: it is not shown again.';

const USAGE = `Usage: oc <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.usage}`).join('\n')}
  oc help

Options:
  --url URL      admin API base URL (env OC_ADMIN_URL, default ${DEFAULT_URL})
  --token TOKEN  admin token, sent as a Bearer token (env OC_ADMIN_TOKEN)
  --json         print the raw JSON response
`;

export async function run(argv: string[], io: Partial<Io> = {}): Promise<number> {
  const full: Io = {
    fetch: io.fetch ?? globalThis.fetch,
    stdout: io.stdout ?? process.stdout,
    stderr: io.stderr ?? process.stderr,
    env: io.env ?? process.env,
  };
  try {
    await dispatch(argv, full);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      full.stderr.write(`error: ${error.message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof CliError) {
      full.stderr.write(`error: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

async function dispatch(argv: string[], io: Io): Promise<void> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs reports unknown options and missing option values as TypeErrors.
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals[0] === 'help') {
    io.stdout.write(USAGE);
    return;
  }
  if (positionals.length === 0) throw new UsageError('no command given');

  const command = COMMANDS.find((c) => c.words.every((w, i) => positionals[i] === w));
  if (!command) throw new UsageError(`unknown command "${positionals.slice(0, 2).join(' ')}"`);
  const args = positionals.slice(command.words.length);
  if (args.length !== command.args) throw new UsageError(`wrong arguments, expected: ${command.usage}`);
  const allowed: string[] = [...GLOBAL_OPTIONS, ...(command.options ?? [])];
  const stray = Object.keys(values).find((o) => !allowed.includes(o));
  if (stray) throw new UsageError(`option --${stray} does not apply to "oc ${command.words.join(' ')}"`);

  const json = values.json ?? false;
  const print: Print = (body, human) => {
    if (!json) io.stdout.write(`${human()}\n`);
    else if (body !== undefined) io.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  };
  const url = (values.url ?? io.env.OC_ADMIN_URL ?? DEFAULT_URL).replace(/\/+$/, '');
  const api = client(url, values.token ?? io.env.OC_ADMIN_TOKEN, io.fetch);
  await command.exec({ api, print, io, json }, args, values);
}

function client(baseUrl: string, token: string | undefined, fetch: Io['fetch']): Api {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let status: number;
    let text: string;
    try {
      const response = await fetch(`${baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      status = response.status;
      text = await response.text();
    } catch (error) {
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new CliError(`cannot reach the admin API at ${baseUrl}: ${cause}`);
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new CliError(`HTTP ${status}: response is not JSON: ${text.slice(0, 200)}`);
    }
    if (status >= 200 && status < 300) return parsed as T;
    const apiError = (parsed as { error?: { message?: string; code?: string } } | undefined)?.error;
    if (!apiError?.message) throw new CliError(`HTTP ${status}`);
    throw new CliError(apiError.code ? `${apiError.message} (${apiError.code})` : apiError.message);
  };
}

function required(value: string | undefined, option: string): string {
  if (!value) throw new UsageError(`${option} is required`);
  return value;
}

function integer(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${option} must be a whole number, got "${value}"`);
  return Number(value);
}

function page(values: Values): string {
  const query = new URLSearchParams();
  const limit = integer(values.limit, '--limit');
  if (limit !== undefined) query.set('limit', String(limit));
  if (values.after) query.set('after', values.after);
  const text = query.toString();
  return text ? `?${text}` : '';
}

function keyStatus(key: ApiKey): string {
  if (key.revoked_at !== null) return 'revoked';
  if (key.expires_at !== null && key.expires_at * 1000 <= Date.now()) return 'expired';
  return 'active';
}

function time(unixSeconds: number | null): string {
  return unixSeconds === null ? '-' : new Date(unixSeconds * 1000).toISOString().replace('.000Z', 'Z');
}

/** Up to 6 decimals so micro-dollar charges stay visible, at least 2 so dollars read as dollars. */
function usd(amount: number): string {
  return `${amount < 0 ? '-' : ''}$${Math.abs(amount).toFixed(6).replace(/0{1,4}$/, '')}`;
}

function organizationText(org: Organization): string {
  const { limits } = org;
  return fields([
    ['id', org.id],
    ['name', org.name],
    ['tier', org.tier],
    ['created', time(org.created)],
    ['requests', `${limits.requests_per_minute}/minute, ${limits.requests_per_day}/day`],
    ['chat', `${limits.chat_requests_per_minute} requests/minute, ${limits.chat_tokens_per_day} tokens/day`],
  ]);
}

function balanceRows(balance: Balance): [string, string][] {
  return [
    ['organization', balance.organization_id],
    ['available', usd(balance.available)],
    ['reserved', usd(balance.reserved)],
    ['tier', balance.tier],
  ];
}

function balanceText(balance: Balance): string {
  return fields(balanceRows(balance));
}

function fields(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
}

function listText<T extends { id: string }>(list: List<T>, empty: string, header: string[], row: (item: T) => string[]): string {
  if (list.data.length === 0) return empty;
  const rows = [header, ...list.data.map(row)];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
  if (list.has_more) lines.push(`(more: --after ${list.data.at(-1)!.id})`);
  return lines.join('\n');
}
