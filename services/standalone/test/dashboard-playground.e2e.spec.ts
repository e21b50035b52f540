import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { watchConsole } from './console-browser';

const ADMIN_TOKEN = 'dashboard-playground-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

/** The member's Playground (issue 30): a streamed chat and a video with its cost shown first, both billed like the API. */
describe.skipIf(!chromiumInstalled())('the console’s Playground in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let orgId: string;
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
  const balance = async () => (await admin('GET', `/organizations/${orgId}/balance`)) as { available: number; reserved: number };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-playground-'));
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        SIM_VIDEO_DURATION_MS: '60000',
        SIM_VIDEO_PRERENDER: '0',
        CHAT_SIMULATOR_WORD_DELAY_MS: '5',
      }),
    });
    orgId = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).id;
    await admin('POST', `/organizations/${orgId}/credits`, { amount: 10 });
    await admin('POST', `/organizations/${orgId}/members`, { email: 'ada@acme.test', password: PASSWORD });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    watchConsole(page, app.url, consoleErrors, answers);
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Playground' }).click();
    await page.getByRole('heading', { level: 1, name: 'Playground' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('streams a chat answer, keeps the conversation, and charges the organization like the API', async () => {
    const before = await balance();
    await page.getByLabel('Message').fill('How do I start a community garden?');
    await page.getByRole('button', { name: 'Send' }).click();
    const usage = page.getByTestId('chat-usage');
    await usage.waitFor();
    expect(await usage.textContent()).toMatch(/^\d+ prompt and \d+ completion tokens, charged to your balance\.$/);
    const answer = page.locator('.conversation li[data-role="assistant"]');
    expect((await answer.textContent())!.length).toBeGreaterThan('chat-2 '.length + 10);
    await expect.poll(async () => (await balance()).available).toBeLessThan(before.available);
    expect((await balance()).reserved).toBe(0);

    await page.getByLabel('Message').fill('And what should I plant first?');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => page.locator('.conversation li').count()).toBe(4);
    // The second answer is charged too: nothing stays held once it is shown.
    await expect.poll(async () => (await balance()).reserved).toBe(0);
    await shot('playground-chat');
  });

  it('shows what a video costs before it is made, then holds exactly that', async () => {
    await page.getByLabel('Video model').selectOption('video-2-pro');
    await page.getByLabel('Seconds').selectOption('8');
    await page.getByLabel('Size').selectOption('1792x1024');
    expect(await page.getByTestId('video-estimate').textContent()).toMatch(/costs \$4\.00,/);
    await page.getByLabel('Video model').selectOption('video-2');
    await page.getByLabel('Seconds').selectOption('4');
    expect(await page.getByTestId('video-estimate').textContent()).toMatch(/costs \$0\.40,/);

    const before = await balance();
    await page.getByLabel('Prompt').fill('A paper boat drifting down a rainy street');
    await page.getByRole('button', { name: 'Create video for $0.40' }).click();
    const created = page.getByTestId('video-created');
    await created.waitFor();
    expect(await created.textContent()).toMatch(/^Video video_\S+ is (queued|in progress) \(\$0\.40 reserved\)/);
    const after = await balance();
    expect(after.reserved).toBeCloseTo(before.reserved + 0.4, 6);
    await shot('playground-video');
  });

  it('fits a 375 px wide screen', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    const overflowing = await page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return [...doc.querySelectorAll('body *')]
        .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1)
        .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
    expect(overflowing).toEqual([]);
    await shot('playground-375');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('met no console error, and every answer matched the OpenAPI document', async () => {
    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
