import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
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

const ADMIN_TOKEN = 'dashboard-usage-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');
const AWKWARD_NAME = 'studio, "prod"';

/** The member's Usage page (issue 30): a report by key, model and day, its chart and its CSV, and the keys' limits. */
describe.skipIf(!chromiumInstalled())('the console’s Usage page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let chatTokens: { prompt_tokens: number; completion_tokens: number };
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
  /** Nothing but a table's own scrolling box is wider than the window. */
  const fitsWidth = () =>
    page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return [...doc.querySelectorAll('body *')]
        .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.table-wrap'))
        .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
  const rowTexts = () => page.locator('table tbody tr').evaluateAll((rows) => rows.map((row) => (row as any).innerText.replace(/\s+/g, ' ').trim()));

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-usage-'));
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
    const backend = await admin('POST', `/organizations/${acme.id}/keys`, { name: 'backend', scopes: ['chat:write'], rate_limit_per_minute: 250, expires_in_days: 30 });
    const studio = await admin('POST', `/organizations/${acme.id}/keys`, { name: AWKWARD_NAME, scopes: ['video:write', 'video:read'] });
    chatTokens = (await v1(backend.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] })).usage;
    const video = await v1(studio.key, 'POST', '/videos', { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' });
    await charged(() => v1(studio.key, 'GET', `/videos/${video.id}`));

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
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

  it('shows spend, tokens and seconds by key and model, with a bar per key, and by day when asked', async () => {
    await go('Usage');
    await expect.poll(async () => (await rowTexts()).length).toBe(2);
    const [chatRow, videoRow] = await rowTexts();
    expect(chatRow).toMatch(new RegExp(`^backend chat-2 1 ${chatTokens.prompt_tokens} ${chatTokens.completion_tokens} 0 \\$0\\.\\d+$`));
    expect(videoRow).toBe(`${AWKWARD_NAME} video-2 1 0 0 4 $0.40`);
    const bars = page.getByRole('list', { name: 'Spend by API key' }).getByRole('listitem');
    expect(await bars.allInnerTexts()).toEqual([expect.stringMatching(/^backend\s+\$0\.\d+$/), expect.stringMatching(/^studio, "prod"\s+\$0\.40$/)]);
    await shot('usage');

    await page.getByRole('checkbox', { name: 'API key' }).uncheck();
    await page.getByRole('checkbox', { name: 'Model' }).uncheck();
    await page.getByRole('checkbox', { name: 'Day (UTC)' }).check();
    await page.getByRole('button', { name: 'Show usage' }).click();
    const today = new Date().toISOString().slice(0, 10);
    await expect.poll(rowTexts).toEqual([expect.stringMatching(new RegExp(`^${today} 2 ${chatTokens.prompt_tokens} ${chatTokens.completion_tokens} 4 \\$0\\.4\\d*$`))]);
    expect(await page.getByRole('list', { name: 'Spend by day (UTC)' }).getByRole('listitem').count()).toBe(1);
  });

  it('downloads the report as CSV, a key name with a comma and quotes quoted', async () => {
    await page.getByRole('checkbox', { name: 'API key' }).check();
    await page.getByRole('button', { name: 'Show usage' }).click();
    await expect.poll(async () => (await rowTexts()).length).toBe(2);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download CSV' }).click()]);
    expect(download.suggestedFilename()).toMatch(/^usage-org_.+\.csv$/);
    const lines = (await readFile((await download.path())!, 'utf8')).split('\r\n');
    expect(lines[0]).toBe('key_id,key_name,day,requests,input_tokens,output_tokens,seconds,spend_usd');
    expect(lines.some((line) => /^key_[^,]+,"studio, ""prod""",\d{4}-\d{2}-\d{2},1,0,0,4,0\.4$/.test(line))).toBe(true);
    expect(lines).toHaveLength(4);
  });

  it("shows each key's expiry and rate limit on the Keys page", async () => {
    await go('API keys');
    const backend = page.locator('tr', { hasText: 'backend' });
    await backend.waitFor();
    expect(await backend.getByTestId('rate-limit').textContent()).toBe('250/min');
    expect(await backend.getByTestId('expires').textContent()).not.toBe('Never');
    const studio = page.locator('tr', { hasText: AWKWARD_NAME });
    expect(await studio.getByTestId('rate-limit').textContent()).toBe('100/min');
    expect(await studio.getByTestId('expires').textContent()).toBe('Never');
  });

  it('fits a 375 px wide screen', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await go('Usage');
    await expect.poll(async () => (await rowTexts()).length).toBeGreaterThan(0);
    expect(await fitsWidth()).toEqual([]);
    await shot('usage-375');
    await go('API keys');
    expect(await fitsWidth()).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('met no console error, and every answer matched the OpenAPI document', async () => {
    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
