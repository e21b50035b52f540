import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'activity-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const PROMPT = 'A paper boat drifting down a rainy street';

interface Row {
  id: string;
  key_id: string | null;
  model: string | null;
  product: string | null;
  status: string;
  amount_held: number;
  amount_charged: number;
  input_tokens: number | null;
  output_tokens: number | null;
  seconds: number | null;
  created: number;
  settled_at: number | null;
}

/** The activity log over HTTP: a member's own organization's paid requests, and the admin API's view of one. */
describe('activity log (/console/v1/activity and /admin/v1/organizations/{org_id}/activity) on a running service', () => {
  let dir: string;
  let app: Standalone;
  const orgs: Record<'acme' | 'globex', { id: string; chatKey: { id: string; key: string }; videoKey: { id: string; key: string } }> = {} as never;
  /** Acme's requests as the API answered them. */
  let chat: { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
  let video: { id: string; cost: number };
  let failed: string;
  let stalled: string;
  let bobsChat: string;

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    await expectConformance(app.url, method, new URL(path, app.url), res.status, res.headers, text);
    return { status: res.status, headers: res.headers, body: JSON.parse(text) };
  }
  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);
  const v1 = (key: string, method: string, path: string, body?: unknown) => call(method, `/v1${path}`, { authorization: `Bearer ${key}` }, body);
  async function signIn(email: string) {
    const res = await call('POST', '/console/v1/sessions', {}, { email, password: PASSWORD });
    expect(res.status).toBe(200);
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    return (path: string) => call('GET', `/console/v1${path}`, { cookie });
  }
  /** Waits (expect.poll is for tests, not their setup) until the video is settled, for at most 30 seconds. */
  async function settled(key: string, id: string, billing: string) {
    for (const started = Date.now(); Date.now() - started < 30_000; await new Promise((r) => setTimeout(r, 100))) {
      if ((await v1(key, 'GET', `/videos/${id}`)).body['x-billing'] === billing) return;
    }
    throw new Error(`video ${id} was not ${billing} within 30 seconds`);
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-activity-'));
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
      const videoKey = (await admin('POST', `/organizations/${id}/keys`, { name: `${name} studio`, scopes: ['video:write', 'video:read'] })).body;
      orgs[name] = { id, chatKey, videoKey };
    }
    const { acme } = orgs;
    const answer = await v1(acme.chatKey.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] });
    expect(answer.status).toBe(200);
    chat = answer.body;
    const made = (await v1(acme.videoKey.key, 'POST', '/videos', { model: 'video-2', prompt: PROMPT, seconds: '4', size: '1280x720' })).body;
    video = { id: made.id, cost: made['x-cost'].amount };
    await settled(acme.videoKey.key, video.id, 'charged');
    failed = (await v1(acme.videoKey.key, 'POST', '/videos', { model: 'video-2', prompt: `${PROMPT} [sim:fail=generation_failed]`, seconds: '4', size: '1280x720' })).body.id;
    await settled(acme.videoKey.key, failed, 'released');
    stalled = (await v1(acme.videoKey.key, 'POST', '/videos', { model: 'video-2-pro', prompt: `${PROMPT} [sim:stall]`, seconds: '4', size: '1280x720' })).body.id;
    bobsChat = (await v1(orgs.globex.chatKey.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Name three kinds of kite.' }] })).body.id;
  });

  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("lists the member's chat and videos newest first, each with its key, model, status, amounts and usage", async () => {
    const ada = await signIn('ada@acme.test');
    const log = await ada('/activity');
    expect(log.status).toBe(200);
    expect(log.body).toMatchObject({ object: 'list', has_more: false });
    const rows = log.body.data as Row[];
    expect(rows.map((r) => r.id)).toEqual([stalled, failed, video.id, chat.id]);
    const [held, released, charged, chatted] = rows;
    expect(chatted).toMatchObject({
      key_id: orgs.acme.chatKey.id,
      model: 'chat-2',
      product: 'chat',
      status: 'charged',
      input_tokens: chat.usage.prompt_tokens,
      output_tokens: chat.usage.completion_tokens,
      seconds: null,
    });
    expect(chatted!.amount_charged).toBeGreaterThan(0);
    expect(chatted!.amount_charged).toBeLessThanOrEqual(chatted!.amount_held);
    expect(charged).toMatchObject({ key_id: orgs.acme.videoKey.id, model: 'video-2', product: 'video', status: 'charged', amount_held: video.cost, amount_charged: video.cost, seconds: 4 });
    expect(released).toMatchObject({ key_id: orgs.acme.videoKey.id, product: 'video', status: 'released', amount_charged: 0 });
    expect(released!.settled_at).not.toBeNull();
    expect(held).toMatchObject({ key_id: orgs.acme.videoKey.id, product: 'video', status: 'held', amount_charged: 0, settled_at: null });

    // The same rows for an operator, under the admin API.
    const operator = await admin('GET', `/organizations/${orgs.acme.id}/activity`);
    expect(operator.status).toBe(200);
    expect(operator.body.data).toEqual(rows);
    expect((await admin('GET', '/organizations/org_nobody/activity')).status).toBe(404);
  });

  it('narrows the log by key, model, status and UTC days, and pages it', async () => {
    const ada = await signIn('ada@acme.test');
    const ids = async (query: string) => {
      const res = await ada(`/activity?${query}`);
      expect(res.status).toBe(200);
      return (res.body.data as Row[]).map((r) => r.id);
    };
    expect(await ids(`key_id=${orgs.acme.chatKey.id}`)).toEqual([chat.id]);
    expect(await ids(`key_id=${orgs.acme.videoKey.id}`)).toEqual([stalled, failed, video.id]);
    expect(await ids('model=video-2')).toEqual([video.id]);
    expect(await ids('model=chat-2')).toEqual([chat.id]);
    expect(await ids('status=held')).toEqual([stalled]);
    expect(await ids('status=released')).toEqual([failed]);
    expect(await ids(`status=charged&key_id=${orgs.acme.videoKey.id}`)).toEqual([video.id]);
    const today = new Date().toISOString().slice(0, 10);
    expect(await ids(`start=${today}&end=${today}`)).toEqual([stalled, failed, video.id, chat.id]);
    expect(await ids('start=2020-01-01&end=2020-12-31')).toEqual([]);

    const first = await ada('/activity?limit=3');
    expect([first.body.data.map((r: Row) => r.id), first.body.has_more]).toEqual([[stalled, failed, video.id], true]);
    const next = await ada(`/activity?limit=3&after=${video.id}`);
    expect([next.body.data.map((r: Row) => r.id), next.body.has_more]).toEqual([[chat.id], false]);
  });

  it('shows another organization nothing of them', async () => {
    const bob = await signIn('bob@globex.test');
    expect((await bob('/activity')).body.data.map((r: Row) => r.id)).toEqual([bobsChat]);
    expect((await bob(`/activity?key_id=${orgs.acme.chatKey.id}`)).body.data).toEqual([]);
    // Acme's rows are no cursor for Globex either.
    expect((await bob(`/activity?after=${video.id}`)).status).toBe(404);
  });

  it('refuses bad parameters with 400 naming the parameter', async () => {
    const ada = await signIn('ada@acme.test');
    for (const [query, param] of [
      ['limit=101', 'limit'],
      ['limit=0', 'limit'],
      ['status=done', 'status'],
      ['start=2026-13-01', 'start'],
      ['end=2026-02-30', 'end'],
      ['start=20261101', 'start'],
      ['start=2026-11-02&end=2026-11-01', 'end'],
      ['colour=blue', 'colour'],
    ]) {
      const res = await ada(`/activity?${query}`);
      expect([query, res.status, res.body.error.type, res.body.error.param]).toEqual([query, 400, 'invalid_request_error', param]);
    }
  });
});
