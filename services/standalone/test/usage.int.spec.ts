import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

/** Waits (expect.poll is for tests, not their setup) until the video is charged, for at most 30 seconds. */
async function charged(read: () => Promise<{ 'x-billing': string }>) {
  for (const started = Date.now(); Date.now() - started < 30_000; await new Promise((r) => setTimeout(r, 100))) {
    if ((await read())['x-billing'] === 'charged') return;
  }
  throw new Error('the video was not charged within 30 seconds');
}

const ADMIN_TOKEN = 'usage-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
/** A key name a CSV must quote: a comma and double quotes. */
const AWKWARD_NAME = 'studio, "prod"';

/** Usage by key, model and day over HTTP: the console's report for each organization, and the admin API's. */
describe('usage reports (/console/v1/usage and /admin/v1/usage) on a running service', () => {
  let dir: string;
  let app: Standalone;
  const orgs: Record<'acme' | 'globex', { id: string; chatKey: { id: string; key: string }; videoKey: { id: string; key: string } }> = {} as never;
  /** What the API answered for Acme's chat and video, to find again in the report. */
  let chatUsage: { prompt_tokens: number; completion_tokens: number };
  let videoCost: number;

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    await expectConformance(app.url, method, new URL(path, app.url), res.status, res.headers, text);
    return { status: res.status, headers: res.headers, text, body: /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : undefined };
  }
  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);
  const v1 = (key: string, method: string, path: string, body?: unknown) => call(method, `/v1${path}`, { authorization: `Bearer ${key}` }, body);
  /** A member's console session: its cookie. */
  async function signIn(email: string) {
    const res = await call('POST', '/console/v1/sessions', {}, { email, password: PASSWORD });
    expect(res.status).toBe(200);
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    return (path: string) => call('GET', `/console/v1${path}`, { cookie });
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-usage-'));
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        SIM_VIDEO_DURATION_MS: '300',
        SIM_VIDEO_PRERENDER: '0',
        CHAT_SIMULATOR_WORD_DELAY_MS: '1',
      }),
    });
    for (const [name, email] of [
      ['acme', 'ada@acme.test'],
      ['globex', 'bob@globex.test'],
    ] as const) {
      const id = (await admin('POST', '/organizations', { name, tier: 'standard' })).body.id as string;
      await admin('POST', `/organizations/${id}/credits`, { amount: 20 });
      await admin('POST', `/organizations/${id}/members`, { email, password: PASSWORD });
      const chatKey = (await admin('POST', `/organizations/${id}/keys`, { name: `${name} backend`, scopes: ['chat:write'] })).body;
      const videoKey = (await admin('POST', `/organizations/${id}/keys`, { name: name === 'acme' ? AWKWARD_NAME : `${name} studio`, scopes: ['video:write', 'video:read'] })).body;
      orgs[name] = { id, chatKey, videoKey };
    }
    const chat = await v1(orgs.acme.chatKey.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] });
    expect(chat.status).toBe(200);
    chatUsage = chat.body.usage;
    const video = await v1(orgs.acme.videoKey.key, 'POST', '/videos', { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' });
    expect(video.status).toBe(200);
    videoCost = video.body['x-cost'].amount;
    // Charged once the video is completed; the report is read after that.
    await charged(() => v1(orgs.acme.videoKey.key, 'GET', `/videos/${video.body.id}`).then((res) => res.body));
    const other = await v1(orgs.globex.chatKey.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Name three kinds of kite.' }] });
    expect(other.status).toBe(200);
  });

  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("puts a chat's tokens and a video's seconds in the rows of the key and model that used them, for the member's organization only", async () => {
    const ada = await signIn('ada@acme.test');
    const report = await ada('/usage?group_by=key,model');
    expect(report.status).toBe(200);
    const chatSpend = report.body.data.find((row: { model: string }) => row.model === 'chat-2')?.spend;
    expect(report.body).toMatchObject({ object: 'usage_report', organization_id: orgs.acme.id, group_by: ['key', 'model'], has_more: false, currency: 'usd' });
    expect(report.body.data).toEqual(
      [
        {
          key_id: orgs.acme.chatKey.id,
          key_name: 'acme backend',
          model: 'chat-2',
          requests: 1,
          input_tokens: chatUsage.prompt_tokens,
          output_tokens: chatUsage.completion_tokens,
          seconds: 0,
          spend: expect.any(Number),
        },
        { key_id: orgs.acme.videoKey.id, key_name: AWKWARD_NAME, model: 'video-2', requests: 1, input_tokens: 0, output_tokens: 0, seconds: 4, spend: videoCost },
      ].sort((a, b) => (a.key_id < b.key_id ? -1 : 1)),
    );
    // The chat was charged what the ledger says, to the micro-dollar.
    const ledger = await ada('/ledger?limit=100');
    const charged = ledger.body.data.filter((e: { type: string }) => e.type === 'capture').map((e: { charged: number }) => e.charged);
    expect(charged.sort()).toEqual([chatSpend, videoCost].sort());

    const bob = await signIn('bob@globex.test');
    const theirs = await bob('/usage?group_by=key,model,day');
    expect(theirs.body.organization_id).toBe(orgs.globex.id);
    expect(theirs.body.data.map((row: { key_id: string }) => row.key_id)).toEqual([orgs.globex.chatKey.id]);
    // Nothing a member sends names another organization.
    expect((await bob(`/usage?org_id=${orgs.acme.id}`)).body.error).toMatchObject({ type: 'invalid_request_error', code: 'unknown_parameter', param: 'org_id' });
  });

  it('answers CSV with a header row, RFC 4180 quoting of a key name with a comma and quotes, and money in USD', async () => {
    const ada = await signIn('ada@acme.test');
    const csv = await ada('/usage?group_by=key,model&format=csv');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(/^attachment; filename="usage-org_[^"]+-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv"$/);
    const lines = csv.text.split('\r\n');
    expect(lines[0]).toBe('key_id,key_name,model,requests,input_tokens,output_tokens,seconds,spend_usd');
    expect(lines).toContain(`${orgs.acme.videoKey.id},"studio, ""prod""",video-2,1,0,0,4,${videoCost}`);
    expect(lines.at(-1)).toBe('');
    expect(lines).toHaveLength(4);

    // A page at a time: the next one named in Link.
    const paged = await ada('/usage?group_by=key&format=csv&limit=1');
    expect(paged.text.split('\r\n')).toHaveLength(3);
    const next = /^<([^>]+)>; rel="next"$/.exec(paged.headers.get('link') ?? '')?.[1];
    expect(next).toMatch(/^\/console\/v1\/usage\?.*after=/);
    const rest = await ada(next!.slice('/console/v1'.length));
    expect(rest.text.split('\r\n')).toHaveLength(3);
    expect(rest.headers.get('link')).toBeNull();
    expect(new Set([paged.text.split('\r\n')[1], rest.text.split('\r\n')[1]]).size).toBe(2);
  });

  it('refuses bad parameters with 400 in the spec’s error shape, naming the parameter', async () => {
    const ada = await signIn('ada@acme.test');
    for (const [query, param] of [
      ['group_by=provider', 'group_by'],
      ['start=2025-01-01&end=2026-01-02', 'start'],
      ['start=2026-03-01&end=2026-02-01', 'end'],
      ['start=yesterday', 'start'],
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['format=xml', 'format'],
      ['after=nonsense', 'after'],
    ] as const) {
      const res = await ada(`/usage?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error, query).toMatchObject({ type: 'invalid_request_error', param, message: expect.any(String), code: expect.any(String) });
    }
  });

  it('gives the admin API the same figures by key, with what they cost us, as JSON and CSV', async () => {
    const report = await admin('GET', `/usage?group_by=key,model&org_id=${orgs.acme.id}`);
    expect(report.status).toBe(200);
    expect(report.body.data.map((row: { key_name: string; model: string; seconds: number }) => [row.key_name, row.model, row.seconds])).toEqual(
      expect.arrayContaining([
        ['acme backend', 'chat-2', 0],
        [AWKWARD_NAME, 'video-2', 4],
      ]),
    );
    expect(report.body.data).toHaveLength(2);
    const everyone = await admin('GET', '/usage?group_by=key');
    expect(everyone.body.data.map((row: { key_id: string }) => row.key_id).sort()).toEqual([orgs.acme.chatKey.id, orgs.acme.videoKey.id, orgs.globex.chatKey.id].sort());

    const csv = await admin('GET', `/usage?group_by=key&org_id=${orgs.acme.id}&format=csv`);
    const lines = csv.text.split('\r\n');
    expect(lines[0]).toBe('key_id,key_name,requests,input_tokens,output_tokens,seconds,revenue_usd,provider_cost_usd,margin_usd');
    expect(lines.find((line) => line.startsWith(orgs.acme.videoKey.id))).toMatch(new RegExp(`^${orgs.acme.videoKey.id},"studio, ""prod""",1,0,0,4,${videoCost},`));
    expect((await admin('GET', '/usage?group_by=key,colour')).body.error).toMatchObject({ type: 'invalid_request_error', param: 'group_by' });
  });
});
