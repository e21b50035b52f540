import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { watchConsole } from './console-browser';

/** Waits (expect.poll is for tests, not their setup) until the video is charged, for at most 30 seconds. */
async function charged(read: () => Promise<{ 'x-billing': string }>) {
  for (const started = Date.now(); Date.now() - started < 30_000; await new Promise((r) => setTimeout(r, 100))) {
    if ((await read())['x-billing'] === 'charged') return;
  }
  throw new Error('the video was not charged within 30 seconds');
}

const ADMIN_TOKEN = 'dashboard-activity-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

/** The member's Activity page (issue 30): the organization's paid requests, filtered by key, model, status and days. */
describe.skipIf(!chromiumInstalled())('the console’s Activity page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let chat: { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
  let videoId: string;
  const consoleErrors: string[] = [];
  /** Every console API answer, checked against the OpenAPI document: what failed to match. */
  const answers: Promise<string | undefined>[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  const v1 = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const go = async (label: string) => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: label }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe(label);
  };
  /**
   * Nothing is wider than the window, and no table scrolls sideways either. A card table's header row, kept for
   * screen readers, is clipped to a pixel: it shows nothing.
   */
  const overflowing = () =>
    page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      const wide = [...doc.querySelectorAll('body *')].filter(
        (e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('table.stacked thead'),
      );
      const scrolling = [...doc.querySelectorAll('.table-wrap')].filter((e: any) => e.scrollWidth > e.clientWidth + 1);
      return [...wide, ...scrolling].map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
  const rowTexts = () => page.locator('table tbody tr').evaluateAll((rows) => rows.map((row) => (row as any).innerText.replace(/\s+/g, ' ').trim()));
  const filter = async (fields: { key?: string; model?: string; status?: string }) => {
    const form = page.getByRole('form', { name: 'Activity filters' });
    await form.getByLabel('API key').selectOption({ label: fields.key ?? 'All keys' });
    await form.getByLabel('Model').fill(fields.model ?? '');
    await form.getByLabel('Status').selectOption({ label: fields.status ?? 'Any status' });
    await form.getByRole('button', { name: 'Show activity' }).click();
  };

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-activity-'));
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
    const acme = await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' });
    await admin('POST', `/organizations/${acme.id}/credits`, { amount: 10 });
    await admin('POST', `/organizations/${acme.id}/members`, { email: 'ada@acme.test', password: PASSWORD });
    const backend = await admin('POST', `/organizations/${acme.id}/keys`, { name: 'backend', scopes: ['chat:write'] });
    const studio = await admin('POST', `/organizations/${acme.id}/keys`, { name: 'studio', scopes: ['video:write', 'video:read'] });
    chat = await v1(backend.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] });
    const video = await v1(studio.key, 'POST', '/videos', { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' });
    videoId = video.id;
    await charged(() => v1(studio.key, 'GET', `/videos/${video.id}`));

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    watchConsole(page, app.url, consoleErrors, answers);
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists the chat and the video newest first with key, model, status, amounts and usage', async () => {
    await go('Activity');
    await expect.poll(async () => (await rowTexts()).length).toBe(2);
    const [videoRow, chatRow] = await rowTexts();
    expect(videoRow).toMatch(new RegExp(`^.+ studio video-2 Video Charged \\$0\\.40 \\$0\\.40 4 s of video ${videoId} .+$`));
    const { prompt_tokens: input, completion_tokens: output } = chat.usage;
    expect(chatRow).toMatch(new RegExp(`^.+ backend chat-2 Chat Charged \\$[\\d.]+ \\$[\\d.]+ ${input} in / ${output} out ${chat.id} .+$`));
    expect(await overflowing()).toEqual([]);
    await shot('activity');
  });

  it('narrows the list by key, model and status, and says when nothing matches', async () => {
    await filter({ key: 'backend' });
    await expect.poll(rowTexts).toEqual([expect.stringContaining(chat.id)]);
    await filter({ model: 'video-2' });
    await expect.poll(rowTexts).toEqual([expect.stringContaining(videoId)]);
    await filter({ key: 'backend', status: 'Held' });
    await page.getByText('No requests match these filters.').waitFor();
    expect(await rowTexts()).toEqual([]);
    await filter({ status: 'Charged' });
    await expect.poll(async () => (await rowTexts()).length).toBe(2);
  });

  it('fits a 375 px wide screen, each request a card', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await expect.poll(async () => (await rowTexts()).length).toBe(2);
    expect(await overflowing()).toEqual([]);
    await shot('activity-375');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('met no console error, and every answer matched the OpenAPI document', async () => {
    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
