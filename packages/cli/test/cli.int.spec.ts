import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../src';

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

const JAN_1_2025 = 1_735_689_600;
/** So that no test reads the profile `oc login` saved on the machine running it. */
const NO_PROFILE = '/nonexistent/oc/config.json';
const STANDARD_LIMITS = { requests_per_minute: 100, requests_per_day: 10_000, chat_requests_per_minute: 60, chat_tokens_per_day: 1_000_000 };
const org = { id: 'org_1', object: 'organization', name: 'Acme', tier: 'standard', limits: STANDARD_LIMITS, created: JAN_1_2025 };
const FREE_LIMITS = { requests_per_minute: 10, requests_per_day: 100, chat_requests_per_minute: 10, chat_tokens_per_day: 10_000 };
const orgList = {
  object: 'list',
  data: [org, { id: 'org_2', object: 'organization', name: 'Globex Corp', tier: 'free', limits: FREE_LIMITS, created: JAN_1_2025 + 60 }],
  has_more: true,
};
const balance = {
  object: 'balance',
  organization_id: 'org_1',
  available: 12.5,
  reserved: 0.00008,
  currency: 'usd',
  tier: 'standard',
};
const ledger = {
  object: 'list',
  data: [
    {
      id: 'led_1',
      object: 'ledger_entry',
      type: 'credit',
      amount: 25,
      charged: 0,
      available_after: 25,
      description: 'Welcome credit',
      reference: null,
      created: JAN_1_2025,
    },
    {
      id: 'led_2',
      object: 'ledger_entry',
      type: 'reservation',
      amount: -0.1,
      charged: 0,
      available_after: 24.9,
      description: 'Chat completion',
      reference: 'chatcmpl_9',
      created: JAN_1_2025 + 5,
    },
    {
      id: 'led_3',
      object: 'ledger_entry',
      type: 'capture',
      amount: 0.02,
      charged: 0.08,
      available_after: 24.92,
      description: 'Usage charged',
      reference: 'chatcmpl_9',
      created: JAN_1_2025 + 6,
    },
  ],
  has_more: false,
};
const liveKey = {
  id: 'key_1',
  object: 'api_key',
  name: 'ci-bot',
  mode: 'live',
  prefix: 'oc_live_ab12',
  scopes: ['video:read', 'chat:write'],
  rate_limit_per_minute: 100,
  created: JAN_1_2025,
  expires_at: null,
  last_used_at: JAN_1_2025 + 86_400,
  revoked_at: null,
  usage: { requests: 1200 },
};
const revokedKey = {
  ...liveKey,
  id: 'key_2',
  name: 'old',
  prefix: 'oc_live_cd34',
  last_used_at: null,
  revoked_at: JAN_1_2025 + 3600,
  usage: { requests: 34 },
};
const keyList = { object: 'list', data: [liveKey, revokedKey], has_more: false };
const createdKey = { ...liveKey, id: 'key_3', key: 'oc_live_ab12SECRETSECRETSECRET' };

describe('oc against a recording admin API', () => {
  const requests: Recorded[] = [];
  const answers = new Map<string, { status: number; body: unknown }>();
  let server: Server;
  let baseUrl: string;

  const answer = (method: string, url: string, body: unknown, status = 200) =>
    answers.set(`${method} ${url}`, { status, body });

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (raw += chunk));
      req.on('end', () => {
        const { method = '', url = '', headers } = req;
        requests.push({ method, url, headers, body: raw === '' ? undefined : JSON.parse(raw) });
        const canned = answers.get(`${method} ${url}`) ?? {
          status: 404,
          body: { error: { type: 'invalid_request_error', message: `no canned answer for ${method} ${url}`, code: 'test' } },
        };
        if (canned.body === undefined) return res.writeHead(canned.status).end();
        res.writeHead(canned.status, { 'content-type': 'application/json' }).end(JSON.stringify(canned.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    requests.length = 0;
    answers.clear();
  });

  async function oc(...argv: string[]) {
    let stdout = '';
    let stderr = '';
    const code = await run(argv, {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      env: { OC_ADMIN_URL: baseUrl, OC_ADMIN_TOKEN: 'adm_token', OC_CONFIG: NO_PROFILE },
    });
    return { code, stdout, stderr };
  }

  describe('sends the exact request and --json prints the response body', () => {
    const cases: { argv: string[]; method: string; url: string; body?: unknown; response: unknown }[] = [
      { argv: ['orgs', 'list'], method: 'GET', url: '/admin/v1/organizations', response: orgList },
      {
        argv: ['orgs', 'list', '--limit', '2', '--after', 'org_0'],
        method: 'GET',
        url: '/admin/v1/organizations?limit=2&after=org_0',
        response: orgList,
      },
      {
        argv: ['orgs', 'create', '--name', 'Acme', '--tier', 'standard'],
        method: 'POST',
        url: '/admin/v1/organizations',
        body: { name: 'Acme', tier: 'standard' },
        response: org,
      },
      {
        argv: ['orgs', 'create', '--name', 'Acme'],
        method: 'POST',
        url: '/admin/v1/organizations',
        body: { name: 'Acme' },
        response: { ...org, tier: 'free' },
      },
      { argv: ['orgs', 'get', 'org_1'], method: 'GET', url: '/admin/v1/organizations/org_1', response: org },
      {
        argv: ['orgs', 'set-tier', 'org_1', 'premium'],
        method: 'PATCH',
        url: '/admin/v1/organizations/org_1',
        body: { tier: 'premium' },
        response: { ...org, tier: 'premium' },
      },
      {
        argv: ['orgs', 'set-limits', 'org_1', '--requests-per-minute', '3', '--chat-tokens-per-day', 'default'],
        method: 'PATCH',
        url: '/admin/v1/organizations/org_1',
        body: { limits: { requests_per_minute: 3, chat_tokens_per_day: null } },
        response: { ...org, tier: 'enterprise', limits: { ...STANDARD_LIMITS, requests_per_minute: 3 } },
      },
      {
        argv: ['credit', 'org_1', '12.5', '--description', 'Promo'],
        method: 'POST',
        url: '/admin/v1/organizations/org_1/credits',
        body: { amount: 12.5, description: 'Promo' },
        response: balance,
      },
      {
        argv: ['credit', 'org_1', '3'],
        method: 'POST',
        url: '/admin/v1/organizations/org_1/credits',
        body: { amount: 3 },
        response: balance,
      },
      { argv: ['balance', 'org_1'], method: 'GET', url: '/admin/v1/organizations/org_1/balance', response: balance },
      { argv: ['ledger', 'org_1'], method: 'GET', url: '/admin/v1/organizations/org_1/ledger', response: ledger },
      {
        argv: ['ledger', 'org_1', '--limit', '50', '--after', 'led_1'],
        method: 'GET',
        url: '/admin/v1/organizations/org_1/ledger?limit=50&after=led_1',
        response: ledger,
      },
      { argv: ['keys', 'list', 'org_1'], method: 'GET', url: '/admin/v1/organizations/org_1/keys', response: keyList },
      {
        argv: ['keys', 'create', 'org_1', '--name', 'ci-bot', '--scope', 'video:read', '--scope', 'chat:write'],
        method: 'POST',
        url: '/admin/v1/organizations/org_1/keys',
        body: { name: 'ci-bot', scopes: ['video:read', 'chat:write'], mode: 'live' },
        response: createdKey,
      },
      {
        argv: [
          'keys',
          'create',
          'org_1',
          '--name',
          'sandbox',
          '--scope',
          'video:write',
          '--rate-limit',
          '20',
          '--expires-in-days',
          '30',
          '--test',
        ],
        method: 'POST',
        url: '/admin/v1/organizations/org_1/keys',
        body: {
          name: 'sandbox',
          scopes: ['video:write'],
          rate_limit_per_minute: 20,
          expires_in_days: 30,
          mode: 'test',
        },
        response: { ...createdKey, mode: 'test', key: 'oc_test_zz' },
      },
      {
        argv: ['keys', 'revoke', 'org_1', 'key_2'],
        method: 'DELETE',
        url: '/admin/v1/organizations/org_1/keys/key_2',
        response: revokedKey,
      },
    ];

    it.each(cases)('oc $argv', async ({ argv, method, url, body, response }) => {
      answer(method, url, response);

      const result = await oc(...argv, '--json');

      expect(result.code).toBe(0);
      expect(requests).toHaveLength(1);
      const [request] = requests;
      expect(request).toMatchObject({ method, url, body });
      expect(request!.headers.authorization).toBe('Bearer adm_token');
      expect(request!.headers.accept).toBe('application/json');
      expect(request!.headers['content-type']).toBe(body === undefined ? undefined : 'application/json');
      expect(JSON.parse(result.stdout)).toEqual(response);
    });

    it('oc usage reads the keys, the balance, and the ledger back to the first entry older than --days', async () => {
      const recent = Math.floor(Date.now() / 1000) - 3600;
      const capture = (id: string, charged: number, reference: string) => ({
        ...ledger.data[2],
        id,
        charged,
        reference,
        created: recent,
      });
      answer('GET', '/admin/v1/organizations/org_1/keys', keyList);
      answer('GET', '/admin/v1/organizations/org_1/balance', balance);
      answer('GET', '/admin/v1/organizations/org_1/ledger?limit=100', {
        object: 'list',
        data: [capture('led_9', 0.4, 'video_1'), capture('led_8', 0.000123, 'chatcmpl_1')],
        has_more: true,
      });
      answer('GET', '/admin/v1/organizations/org_1/ledger?limit=100&after=led_8', {
        object: 'list',
        data: [capture('led_7', 0.000077, 'cmpl_1'), ledger.data[2], capture('led_0', 5, 'video_0')],
        has_more: true,
      });

      const result = await oc('usage', 'org_1', '--days', '7', '--json');

      expect(result.code).toBe(0);
      expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
        'GET /admin/v1/organizations/org_1/keys',
        'GET /admin/v1/organizations/org_1/balance',
        'GET /admin/v1/organizations/org_1/ledger?limit=100',
        'GET /admin/v1/organizations/org_1/ledger?limit=100&after=led_8',
      ]);
      expect(JSON.parse(result.stdout)).toEqual({ keys: keyList, balance, charged: { days: 7, total: 0.4002, videos: 0.4, chat: 0.0002 } });
    });
  });

  describe('human output', () => {
    it('lists organizations as a table with a hint for the next page', async () => {
      answer('GET', '/admin/v1/organizations', orgList);
      const { code, stdout } = await oc('orgs', 'list');
      expect(code).toBe(0);
      expect(stdout).toMatch(/^ID\s+NAME\s+TIER\s+CREATED\n/);
      expect(stdout).toMatch(/org_1\s+Acme\s+standard\s+2025-01-01T00:00:00Z/);
      expect(stdout).toMatch(/org_2\s+Globex Corp\s+free\s+2025-01-01T00:01:00Z/);
      expect(stdout).toContain('(more: --after org_2)');
    });

    it('prints an organization', async () => {
      answer('GET', '/admin/v1/organizations/org_1', org);
      const { stdout } = await oc('orgs', 'get', 'org_1');
      expect(stdout).toMatch(
        /id\s+org_1\nname\s+Acme\ntier\s+standard\ncreated\s+2025-01-01T00:00:00Z\nrequests\s+100\/minute, 10000\/day\nchat\s+60 requests\/minute, 1000000 tokens\/day\n/,
      );
    });

    it('prints a balance without hiding micro-dollars', async () => {
      answer('GET', '/admin/v1/organizations/org_1/balance', balance);
      const { stdout } = await oc('balance', 'org_1');
      expect(stdout).toMatch(/organization\s+org_1/);
      expect(stdout).toMatch(/available\s+\$12\.50\n/);
      expect(stdout).toMatch(/reserved\s+\$0\.00008\n/);
      expect(stdout).toMatch(/tier\s+standard/);
    });

    it('prints the balance after a credit', async () => {
      answer('POST', '/admin/v1/organizations/org_1/credits', balance);
      const { stdout } = await oc('credit', 'org_1', '12.5');
      expect(stdout).toMatch(/available\s+\$12\.50\n/);
    });

    it('prints the ledger with signed amounts and what each capture charged', async () => {
      answer('GET', '/admin/v1/organizations/org_1/ledger', ledger);
      const { stdout } = await oc('ledger', 'org_1');
      expect(stdout).toMatch(/^ID\s+TYPE\s+AMOUNT\s+CHARGED\s+AVAILABLE_AFTER/);
      expect(stdout).toMatch(/led_1\s+credit\s+\$25\.00\s+-\s+\$25\.00\s+2025-01-01T00:00:00Z\s+Welcome credit\s+-/);
      expect(stdout).toMatch(/led_2\s+reservation\s+-\$0\.10\s+-\s+\$24\.90\s+2025-01-01T00:00:05Z\s+Chat completion\s+chatcmpl_9/);
      expect(stdout).toMatch(/led_3\s+capture\s+\$0\.02\s+\$0\.08\s+\$24\.92\s+2025-01-01T00:00:06Z\s+Usage charged\s+chatcmpl_9/);
      expect(stdout).not.toContain('(more');
    });

    it('lists keys with scopes, usage and status', async () => {
      answer('GET', '/admin/v1/organizations/org_1/keys', keyList);
      const { stdout } = await oc('keys', 'list', 'org_1');
      expect(stdout).toMatch(
        /key_1\s+ci-bot\s+live\s+oc_live_ab12\s+video:read,chat:write\s+100\s+1200\s+2025-01-02T00:00:00Z\s+-\s+active/,
      );
      expect(stdout).toMatch(/key_2\s+old\s+.*\s+34\s+-\s+-\s+revoked/);
    });

    it('shows a new key once, prominently, with a warning', async () => {
      answer('POST', '/admin/v1/organizations/org_1/keys', createdKey);
      const { code, stdout, stderr } = await oc('keys', 'create', 'org_1', '--name', 'ci-bot', '--scope', 'video:read');
      expect(code).toBe(0);
      expect(stderr).toBe('');
      expect(stdout).toContain('Created live key key_3 "ci-bot" for org_1');
      expect(stdout).toContain('\n    oc_live_ab12SECRETSECRETSECRET\n');
      expect(stdout.split('oc_live_ab12SECRETSECRETSECRET')).toHaveLength(2);
      expect(stdout).toContain('not shown again');
    });

    it('keeps stdout pure JSON for a new key and warns on stderr', async () => {
      answer('POST', '/admin/v1/organizations/org_1/keys', createdKey);
      const { stdout, stderr } = await oc('keys', 'create', 'org_1', '--name', 'ci-bot', '--scope', 'video:read', '--json');
      expect(JSON.parse(stdout).key).toBe(createdKey.key);
      expect(stderr).toContain('not shown again');
    });

    it('confirms a revocation, also when the API answers 204', async () => {
      answer('DELETE', '/admin/v1/organizations/org_1/keys/key_2', revokedKey);
      expect((await oc('keys', 'revoke', 'org_1', 'key_2')).stdout).toBe('Revoked key key_2 at 2025-01-01T01:00:00Z\n');

      answer('DELETE', '/admin/v1/organizations/org_1/keys/key_2', undefined, 204);
      expect(await oc('keys', 'revoke', 'org_1', 'key_2')).toEqual({ code: 0, stdout: 'Revoked key key_2\n', stderr: '' });
      expect(await oc('keys', 'revoke', 'org_1', 'key_2', '--json')).toEqual({ code: 0, stdout: '', stderr: '' });
    });

    it('summarises usage per key with the balance and what was charged', async () => {
      answer('GET', '/admin/v1/organizations/org_1/keys', keyList);
      answer('GET', '/admin/v1/organizations/org_1/balance', balance);
      answer('GET', '/admin/v1/organizations/org_1/ledger?limit=100', ledger);
      const { stdout } = await oc('usage', 'org_1', '--days', '100000');
      expect(stdout).toMatch(/charged, 100000 days\s+\$0\.08 \(videos \$0\.00, chat and text \$0\.08\)/);
      expect(stdout).toMatch(/key_1\s+ci-bot\s+active\s+1200\s+2025-01-02T00:00:00Z/);
      expect(stdout).toMatch(/key_2\s+old\s+revoked\s+34\s+-/);
      expect(stdout).toMatch(/total requests\s+1234/);
      expect(stdout).toMatch(/available\s+\$12\.50/);
    });
  });

  describe('oc members', () => {
    const member = { id: 'mem_1', object: 'member', organization_id: 'org_1', email: 'ada@acme.test', name: 'Ada', created: JAN_1_2025 };
    async function ocWithStdin(stdin: string[], ...argv: string[]) {
      let stdout = '';
      let stderr = '';
      const code = await run(argv, {
        stdout: { write: (s: string) => (stdout += s) },
        stderr: { write: (s: string) => (stderr += s) },
        stdin: (async function* () {
          yield* stdin;
        })(),
        env: { OC_ADMIN_URL: baseUrl, OC_ADMIN_TOKEN: 'adm_token', OC_CONFIG: NO_PROFILE },
      });
      return { code, stdout, stderr };
    }

    it('creates a member with the password read from stdin, spaces kept, and never prints it', async () => {
      answer('POST', '/admin/v1/organizations/org_1/members', member);
      const { code, stdout } = await ocWithStdin([' my long pass phrase \n'], 'members', 'create', 'org_1', '--email', 'ada@acme.test', '--name', 'Ada', '--password', '-');
      expect(code).toBe(0);
      expect(requests[0]).toMatchObject({
        method: 'POST',
        url: '/admin/v1/organizations/org_1/members',
        headers: { authorization: 'Bearer adm_token' },
        body: { email: 'ada@acme.test', name: 'Ada', password: ' my long pass phrase ' },
      });
      expect(stdout).toMatch(/^Added ada@acme.test \(mem_1\) to org_1; they sign in at \/dashboard\n/);
      expect(stdout).not.toContain('pass phrase');
    });

    it('generates a password when none is given and shows it once (on stderr with --json)', async () => {
      answer('POST', '/admin/v1/organizations/org_1/members', member);
      const human = await ocWithStdin([], 'members', 'create', 'org_1', '--email', 'ada@acme.test');
      const sent = (requests[0]!.body as { password: string }).password;
      expect(sent).toMatch(/^[A-Za-z0-9_-]{24}$/);
      expect(human.stdout.split(sent)).toHaveLength(2);
      expect(human.stdout).toContain('shown only now');

      const json = await ocWithStdin([], 'members', 'create', 'org_1', '--email', 'ada@acme.test', '--json');
      expect(JSON.parse(json.stdout)).toEqual(member);
      expect(json.stderr).toBe(`Password (shown only now): ${(requests[1]!.body as { password: string }).password}\n`);
    });

    it('refuses a password on the command line', async () => {
      const { code, stderr } = await ocWithStdin([], 'members', 'create', 'org_1', '--email', 'a@b.test', '--password', 'hunter2hunter2');
      expect(code).toBe(2);
      expect(stderr).toMatch(/^error: --password takes only -/);
      expect(requests).toHaveLength(0);
    });

    it('lists and removes members', async () => {
      answer('GET', '/admin/v1/organizations/org_1/members', { object: 'list', data: [member], has_more: false });
      answer('DELETE', '/admin/v1/organizations/org_1/members/mem_1', member);
      const list = await ocWithStdin([], 'members', 'list', 'org_1');
      expect(list.stdout).toMatch(/^ID\s+EMAIL\s+NAME\s+CREATED\nmem_1\s+ada@acme.test\s+Ada\s+/);
      const removed = await ocWithStdin([], 'members', 'remove', 'org_1', 'mem_1');
      expect(removed).toMatchObject({ code: 0, stdout: 'Removed ada@acme.test (mem_1)\n' });
      expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
        'GET /admin/v1/organizations/org_1/members',
        'DELETE /admin/v1/organizations/org_1/members/mem_1',
      ]);
    });
  });

  describe('configuration', () => {
    it('--url and --token override the environment, and no token sends no Authorization', async () => {
      answer('GET', '/admin/v1/organizations/org_1', org);
      await run(['orgs', 'get', 'org_1', '--url', `${baseUrl}/`, '--token', 'flag_token'], {
        stdout: { write: () => true },
        env: { OC_ADMIN_URL: 'http://127.0.0.1:1', OC_ADMIN_TOKEN: 'env_token', OC_CONFIG: NO_PROFILE },
      });
      await run(['orgs', 'get', 'org_1', '--url', baseUrl], { stdout: { write: () => true }, env: { OC_CONFIG: NO_PROFILE } });

      expect(requests.map((r) => r.headers.authorization)).toEqual(['Bearer flag_token', undefined]);
    });
  });

  describe('failures', () => {
    it('prints an API error with its code and exits 1', async () => {
      answer(
        'GET',
        '/admin/v1/organizations/org_x',
        { error: { type: 'invalid_request_error', message: 'No such organization: org_x', code: 'resource_not_found' } },
        404,
      );
      expect(await oc('orgs', 'get', 'org_x')).toEqual({
        code: 1,
        stdout: '',
        stderr: 'error: No such organization: org_x (resource_not_found)\n',
      });
    });

    it('reports a 401 the same way in --json mode', async () => {
      answer(
        'GET',
        '/admin/v1/organizations',
        { error: { type: 'authentication_error', message: 'Invalid admin token', code: 'invalid_api_key' } },
        401,
      );
      expect(await oc('orgs', 'list', '--json')).toEqual({
        code: 1,
        stdout: '',
        stderr: 'error: Invalid admin token (invalid_api_key)\n',
      });
    });

    it('reports an unreachable service and exits 1', async () => {
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));

      const { code, stderr } = await oc('balance', 'org_1', '--url', `http://127.0.0.1:${port}`);
      expect(code).toBe(1);
      expect(stderr).toMatch(new RegExp(`^error: cannot reach the admin API at http://127.0.0.1:${port}: .*ECONNREFUSED`));
    });

    it.each([
      [['launch']],
      [['orgs']],
      [['orgs', 'delete', 'org_1']],
      [['orgs', 'get']],
      [['balance', 'org_1', 'extra']],
      [['balance', 'org_1', '--name', 'x']],
      [['orgs', 'list', '--bogus']],
      [['orgs', 'create']],
      [['keys', 'create', 'org_1', '--name', 'x']],
      [['keys', 'create', 'org_1', '--name', 'x', '--scope', 'video:read', '--rate-limit', 'lots']],
      [['credit', 'org_1', 'ten']],
      [['orgs', 'set-limits', 'org_1']],
      [['orgs', 'set-limits', 'org_1', '--requests-per-minute', 'lots']],
      [[]],
    ])('oc %j is a usage error: exit 2, usage on stderr, no request', async (argv) => {
      const { code, stdout, stderr } = await oc(...argv);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toMatch(/^error: .+\n\nUsage: oc <command>/);
      expect(requests).toEqual([]);
    });

    it.each([[['help']], [['--help']], [['orgs', 'list', '-h']]])('oc %j prints the usage and exits 0', async (argv) => {
      const { code, stdout, stderr } = await oc(...argv);
      expect(code).toBe(0);
      expect(stderr).toBe('');
      expect(stdout).toContain('oc keys create ORG_ID --name NAME --scope SCOPE');
      expect(requests).toEqual([]);
    });
  });
});
