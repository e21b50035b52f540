import type { ApiKey, Balance, CreatedApiKey, LedgerEntry, LimitName, Organization } from '@oc/contracts';
import type { Client } from './client';
import { type Command, fields, integer, type List, listText, page, required, time, UsageError, usd } from './command';

/** `oc orgs set-limits` options, each naming one figure of the organization's `limits`. */
const LIMIT_OPTIONS = {
  'requests-per-minute': 'requests_per_minute',
  'requests-per-day': 'requests_per_day',
  'chat-requests-per-minute': 'chat_requests_per_minute',
  'chat-tokens-per-day': 'chat_tokens_per_day',
} as const satisfies Record<string, LimitName>;

const orgPath = (orgId: string) => `/admin/v1/organizations/${encodeURIComponent(orgId)}`;

export const ADMIN_COMMANDS: Command[] = [
  {
    usage: 'oc orgs list [--limit N] [--after ORG_ID]',
    words: ['orgs', 'list'],
    args: 0,
    options: ['limit', 'after'],
    async exec({ admin, print }, _, values) {
      const list = await admin.json<List<Organization>>('GET', `/admin/v1/organizations${page(values)}`);
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
    async exec({ admin, print }, _, values) {
      const org = await admin.json<Organization>('POST', '/admin/v1/organizations', {
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
    async exec({ admin, print }, [orgId]) {
      const org = await admin.json<Organization>('GET', orgPath(orgId!));
      print(org, () => organizationText(org));
    },
  },
  {
    usage: 'oc orgs set-tier ORG_ID TIER',
    words: ['orgs', 'set-tier'],
    args: 2,
    async exec({ admin, print }, [orgId, tier]) {
      const org = await admin.json<Organization>('PATCH', orgPath(orgId!), { tier });
      print(org, () => organizationText(org));
    },
  },
  {
    usage:
      'oc orgs set-limits ORG_ID [--requests-per-minute N|default] [--requests-per-day N|default] [--chat-requests-per-minute N|default] [--chat-tokens-per-day N|default]  (enterprise only)',
    words: ['orgs', 'set-limits'],
    args: 1,
    options: Object.keys(LIMIT_OPTIONS) as (keyof typeof LIMIT_OPTIONS)[],
    async exec({ admin, print }, [orgId], values) {
      const limits: Partial<Record<LimitName, number | null>> = {};
      for (const [option, name] of Object.entries(LIMIT_OPTIONS) as [keyof typeof LIMIT_OPTIONS, LimitName][]) {
        const value = values[option];
        // `default` gives the figure back to the tier (null in the API).
        if (value !== undefined) limits[name] = value === 'default' ? null : integer(value, `--${option}`)!;
      }
      if (Object.keys(limits).length === 0) throw new UsageError('name at least one limit to set');
      const org = await admin.json<Organization>('PATCH', orgPath(orgId!), { limits });
      print(org, () => organizationText(org));
    },
  },
  {
    usage: 'oc credit ORG_ID AMOUNT_USD [--description TEXT]',
    words: ['credit'],
    args: 2,
    options: ['description'],
    async exec({ admin, print }, [orgId, amount], values) {
      const usd = Number(amount);
      if (amount!.trim() === '' || !Number.isFinite(usd)) throw new UsageError(`AMOUNT_USD must be a number, got "${amount}"`);
      const balance = await admin.json<Balance>('POST', `${orgPath(orgId!)}/credits`, {
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
    async exec({ admin, print }, [orgId]) {
      const balance = await admin.json<Balance>('GET', `${orgPath(orgId!)}/balance`);
      print(balance, () => balanceText(balance));
    },
  },
  {
    usage: 'oc ledger ORG_ID [--limit N] [--after ENTRY_ID]',
    words: ['ledger'],
    args: 1,
    options: ['limit', 'after'],
    async exec({ admin, print }, [orgId], values) {
      const list = await admin.json<List<LedgerEntry>>('GET', `${orgPath(orgId!)}/ledger${page(values)}`);
      print(list, () =>
        listText(list, 'no ledger entries', ['ID', 'TYPE', 'AMOUNT', 'CHARGED', 'AVAILABLE_AFTER', 'CREATED', 'DESCRIPTION', 'REFERENCE'], (e) => [
          e.id,
          e.type,
          usd(e.amount),
          // A capture's amount is what it gave back to the balance; what it cost is `charged`.
          e.type === 'capture' ? usd(e.charged) : '-',
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
    async exec({ admin, print }, [orgId]) {
      const list = await admin.json<List<ApiKey>>('GET', `${orgPath(orgId!)}/keys`);
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
    async exec({ admin, print, io, json }, [orgId], values) {
      const name = required(values.name, '--name');
      if (!values.scope?.length) throw new UsageError('at least one --scope is required');
      const key = await admin.json<CreatedApiKey>('POST', `${orgPath(orgId!)}/keys`, {
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
    async exec({ admin, print }, [orgId, keyId]) {
      const body = await admin.json<ApiKey | undefined>('DELETE', `${orgPath(orgId!)}/keys/${encodeURIComponent(keyId!)}`);
      print(body, () => `Revoked key ${keyId}${body?.revoked_at ? ` at ${time(body.revoked_at)}` : ''}`);
    },
  },
  {
    usage: 'oc usage ORG_ID [--days N]  (requests per key, and what was charged in the last N days, default 30)',
    words: ['usage'],
    args: 1,
    options: ['days'],
    async exec({ admin, print }, [orgId], values) {
      const days = integer(values.days, '--days') ?? 30;
      const keys = await admin.json<List<ApiKey>>('GET', `${orgPath(orgId!)}/keys`);
      const balance = await admin.json<Balance>('GET', `${orgPath(orgId!)}/balance`);
      const charged = { days, ...(await chargedSince(admin, orgId!, Date.now() / 1000 - days * 86_400)) };
      const total = keys.data.reduce((sum, k) => sum + k.usage.requests, 0);
      print({ keys, balance, charged }, () =>
        [
          listText(keys, 'no API keys', ['KEY', 'NAME', 'STATUS', 'REQUESTS', 'LAST_USED'], (k) => [
            k.id,
            k.name,
            keyStatus(k),
            String(k.usage.requests),
            time(k.last_used_at),
          ]),
          '',
          fields([
            ['total requests', String(total)],
            [`charged, ${days} days`, `${usd(charged.total)} (videos ${usd(charged.videos)}, chat and text ${usd(charged.chat)})`],
            ...balanceRows(balance),
          ]),
        ].join('\n'),
      );
    },
  },
];

/**
 * What the organization's captures charged since a time, from its ledger (newest first, read page by page
 * until an older entry): no API reports usage in dollars. A capture's reference names what it paid for.
 */
async function chargedSince(admin: Client, orgId: string, since: number): Promise<{ total: number; videos: number; chat: number }> {
  // Summed in micro-dollars, the ledger's own unit, so that many small charges add up exactly.
  let videos = 0;
  let chat = 0;
  let after: string | undefined;
  for (;;) {
    const query = new URLSearchParams({ limit: '100', ...(after ? { after } : {}) });
    const page = await admin.json<List<LedgerEntry>>('GET', `${orgPath(orgId)}/ledger?${query}`);
    for (const entry of page.data) {
      if (entry.created < since) return dollars(videos, chat);
      if (entry.type !== 'capture') continue;
      const micros = Math.round(entry.charged * 1e6);
      if (entry.reference?.startsWith('video_')) videos += micros;
      else chat += micros;
    }
    if (!page.has_more || page.data.length === 0) return dollars(videos, chat);
    after = page.data.at(-1)!.id;
  }
}

const dollars = (videos: number, chat: number) => ({ total: (videos + chat) / 1e6, videos: videos / 1e6, chat: chat / 1e6 });

const KEY_WARNING = 'Store this key now: it is not shown again.';

function keyStatus(key: ApiKey): string {
  if (key.revoked_at !== null) return 'revoked';
  if (key.expires_at !== null && key.expires_at * 1000 <= Date.now()) return 'expired';
  return 'active';
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

export function balanceText(balance: Balance): string {
  return fields(balanceRows(balance));
}

