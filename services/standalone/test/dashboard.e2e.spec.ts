import { createServer, type Server } from 'node:http';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SCOPES } from '@oc/contracts';
import { type Browser, type BrowserContext, chromium, type Page, type Request, type Response as PlaywrightResponse, type Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'dashboard-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
/** Screenshots of every page, left in the working copy (ignored by git; CI uploads nothing). */
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

/**
 * The web console in a real browser against a running service: what a member and an operator see and do,
 * every page photographed, and no error in the browser's console that the test did not provoke itself.
 */
/**
 * Chromium drops the body of a response once its page has navigated away, so an answer still being read at that
 * moment cannot be checked: it is left out (the page's other answers are), not counted as a mismatch.
 */
const unreadable = (error: unknown) => /navigated away|No resource with given identifier/.test((error as Error).message);

describe.skipIf(!chromiumInstalled())('the web console in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Server;
  let hookUrl: string;
  /** The receiver refuses video.processing deliveries until told otherwise, so the log has a failure to resend. */
  let refuseProcessing = true;
  const consoleErrors: string[] = [];
  /** Failures the test provokes on purpose (Bob opening Ada's transcript). */
  const expectedErrors: RegExp[] = [];
  let key = '';
  let acmeId = '';
  /** Acme's test key (`oc_test_…`): its videos are never charged. */
  let testKey = '';
  let chatSessionId = '';
  /** Every API answer the browser got, checked against the OpenAPI document: what failed to match. */
  const answers: Promise<string | undefined>[] = [];
  /** Requests the test answered itself with a failure, which no service made and the document need not hold. */
  const provoked = new WeakSet<Request>();
  const failWith503 = (route: Route) => {
    provoked.add(route.request());
    return route.fulfill({
      status: 503,
      contentType: 'application/json',
      body: JSON.stringify({ error: { type: 'api_error', code: 'service_unavailable', message: 'The service is temporarily unavailable. Please retry.' } }),
    });
  };

  const checkAnswer = async (response: PlaywrightResponse): Promise<string | undefined> => {
    const url = new URL(response.url());
    const headers = new Headers(await response.allHeaders());
    const json = /^application\/json/.test(headers.get('content-type') ?? '');
    try {
      const text = json ? await response.text() : '';
      await expectConformance(app.url, response.request().method(), url, response.status(), headers, text);
      return undefined;
    } catch (error) {
      return unreadable(error) ? undefined : (error as Error).message;
    }
  };

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  const v1 = (method: string, path: string, body?: unknown, as = key) =>
    fetch(`${app.url}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const go = async (label: string) => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: label }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe(label);
  };
  /** Nothing wider than the window: the page works at 375 px without sideways scrolling. */
  const fitsWidth = async () => {
    // These functions run in the page; the test's own TypeScript has no DOM types.
    const wider = await page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return [...doc.querySelectorAll('body *')]
        .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.table-wrap'))
        .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
    expect(wider).toEqual([]);
    return page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth <= (globalThis as any).innerWidth);
  };

  /**
   * WCAG's contrast: every visible piece of text at 4.5:1 against what is behind it (3:1 when large), and the
   * focus outline of everything Tab reaches at 3:1 against the background around it (1.4.11), from the
   * computed colours, backgrounds composited up to the page.
   */
  const contrastProblems = async (where: string): Promise<string[]> => {
    const text = await page.evaluate(auditContrast, 'text' as const);
    // Tab through the page from its top, as a keyboard user does, until focus comes back round.
    await page.evaluate(auditContrast, 'reset' as const);
    const focus: string[] = [];
    for (let presses = 0; presses < 150; presses++) {
      await page.keyboard.press('Tab');
      const step = await page.evaluate(auditContrast, 'focus' as const);
      if (step[0] === 'done') break;
      focus.push(...step);
    }
    return [...text, ...focus].map((problem) => `${where}: ${problem}`);
  };

  async function signIn(email: string) {
    await page.goto(`${app.url}/dashboard/`);
    // By keyboard alone: the form's fields are labelled and in order.
    await page.getByLabel('Email').focus();
    await page.keyboard.type(email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  }

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-'));
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        const type = (JSON.parse(body || '{}') as { type?: string }).type;
        res.writeHead(type === 'video.processing' && refuseProcessing ? 500 : 200).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/oc`;
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        KEY_USAGE_FLUSH_MS: '200',
        SIM_VIDEO_DURATION_MS: '3000',
        SIM_VIDEO_PRERENDER: '0',
        CHAT_SIMULATOR_WORD_DELAY_MS: '1',
        WEBHOOK_ALLOW_PRIVATE: '1',
        WEBHOOK_RETRY_DELAYS_MS: '0,100,200,300',
      }),
    });
    const acme = await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' });
    acmeId = acme.id;
    await admin('POST', `/organizations/${acme.id}/credits`, { amount: 10, description: 'Welcome credit' });
    await admin('POST', `/organizations/${acme.id}/members`, { email: 'ada@acme.test', name: 'Ada', password: PASSWORD });
    const globex = await admin('POST', '/organizations', { name: 'Globex', tier: 'free' });
    await admin('POST', `/organizations/${globex.id}/members`, { email: 'bob@globex.test', password: PASSWORD });

    // playwright-core gives the browser a fresh profile of its own.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'] });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const text = `${message.text()} ${message.location().url}`;
      if (!expectedErrors.some((e) => e.test(text))) consoleErrors.push(text);
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    page.on('response', (response) => {
      const url = new URL(response.url());
      if (provoked.has(response.request())) return;
      if (url.origin === app.url && /^\/(v1|console\/v1|admin\/v1)\//.test(url.pathname)) answers.push(checkAnswer(response));
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await new Promise((r) => receiver?.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  it('signs a member in and shows the balance, tier and a 30-day spend chart', async () => {
    await signIn('ada@acme.test');
    await expect.poll(() => page.getByTestId('available').textContent()).toBe('$10.00');
    await expect.poll(() => page.locator('.chart svg').count()).toBeGreaterThan(0);
    expect(await page.getByText('Acme · ada@acme.test').isVisible()).toBe(true);
  });

  it('registers a webhook (its secret shown once), disables and re-enables it, and sends a test event', async () => {
    await go('Webhooks');
    await page.getByLabel('URL').fill(hookUrl);
    await page.getByRole('checkbox', { name: 'video.processing' }).check();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await page.getByLabel(`Signing secret of ${hookUrl}`, { exact: true }).inputValue();
    expect(secret).toMatch(/^whsec_/);
    const panel = page.getByRole('region', { name: `Webhook ${hookUrl}` });
    await panel.getByRole('button', { name: 'Disable' }).click();
    await expect.poll(() => panel.getByTestId('webhook-state').textContent()).toBe('disabled');
    await panel.getByRole('button', { name: 'Re-enable' }).click();
    await expect.poll(() => panel.getByTestId('webhook-state').textContent()).toBe('active');
    await panel.getByRole('button', { name: 'Send test event' }).click();
    await expect.poll(() => panel.getByTestId('test-result').textContent()).toMatch(/^Test delivered: HTTP 200 in \d+ ms$/);
  });

  it('creates a key whose value is shown once, and the API accepts it', async () => {
    await go('API keys');
    await page.getByLabel('Name').fill('ci');
    for (const scope of ['video:read', 'video:write', 'chat:read', 'chat:write']) await page.getByRole('checkbox', { name: scope }).check();
    await page.getByLabel('Rate limit (requests per minute)').fill('300');
    await page.getByLabel('Expires after (days)').fill('30');
    await page.getByRole('button', { name: 'Create key' }).click();
    key = await page.getByLabel('New key “ci”', { exact: true }).inputValue();
    expect(key).toMatch(/^oc_live_[A-Za-z0-9_-]{43}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    const row = page.locator('tr', { hasText: key.slice(0, 12) });
    expect(await row.textContent()).toContain('video:write');

    const balance = await v1('GET', '/account/balance');
    expect(balance.status).toBe(200);
    const chat = await v1('POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] });
    chatSessionId = ((await chat.json()) as { session_id: string }).session_id;
    await shot('keys');
  });

  it('shows a video made through the API reach 100 % and plays it', async () => {
    const created = await v1('POST', '/videos', { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' });
    expect(created.status).toBe(200);
    const video = (await created.json()) as { id: string };
    await go('Videos');
    const item = page.locator(`[data-video-id="${video.id}"]`);
    await expect.poll(() => item.getByTestId('progress').textContent(), { timeout: 30_000, interval: 250 }).toBe('100%');
    expect(await item.locator('.badge').textContent()).toBe('completed');
    await item.getByRole('button', { name: 'Play' }).click();
    const player = item.locator('video');
    await expect.poll(() => player.evaluate((v) => (v as unknown as { readyState: number }).readyState), { timeout: 15_000 }).toBeGreaterThanOrEqual(1);
    expect(await player.evaluate((v) => (v as unknown as { duration: number }).duration)).toBeCloseTo(4, 0);
    await shot('videos');
  });

  it('lists the deliveries with their status codes and resends a failed one', async () => {
    await go('Webhooks');
    const panel = page.getByRole('region', { name: `Webhook ${hookUrl}` });
    await panel.getByRole('button', { name: 'Deliveries' }).click();
    // video.processing was refused (500) on every attempt; video.completed went through (200).
    const failed = panel.locator('tr', { hasText: 'video.processing' }).filter({ hasText: 'failed' }).first();
    await expect
      .poll(async () => {
        await panel.getByRole('button', { name: 'Hide deliveries' }).click();
        await panel.getByRole('button', { name: 'Deliveries' }).click();
        return failed.count();
      }, { timeout: 30_000 })
      .toBe(1)
      // What the log showed instead, for whoever reads a failure.
      .catch(async (error: Error) => {
        throw new Error(`${error.message}\nthe log showed: ${await panel.locator('table, .empty, .error').allTextContents()}`);
      });
    expect(await failed.textContent()).toContain('500');
    expect(await panel.locator('tr', { hasText: 'video.completed' }).first().textContent()).toContain('200');
    refuseProcessing = false;
    await failed.getByRole('button', { name: 'Resend' }).click();
    await expect.poll(async () => {
      await panel.getByRole('button', { name: 'Hide deliveries' }).click();
      await panel.getByRole('button', { name: 'Deliveries' }).click();
      return panel.locator('tr', { hasText: 'video.processing' }).first().textContent();
    }, { timeout: 15_000 }).toMatch(/200.*succeeded/);
    await shot('webhooks');
  });

  it('opens a chat transcript, and shows the ledger with a CSV export', async () => {
    await go('Chat sessions');
    await page.getByRole('link', { name: new RegExp(chatSessionId) }).click();
    await page.getByText('How do I start a community garden?').waitFor();
    expect(await page.locator('.message.assistant').count()).toBe(1);
    await shot('chat');

    await go('Ledger');
    await page.getByText('Welcome credit').waitFor();
    expect(await page.locator('tbody tr').count()).toBeGreaterThanOrEqual(5);
    const csv = await page.evaluate(async () => (await fetch('/console/v1/ledger.csv')).text());
    expect(csv.split('\r\n')[0]).toBe('id,created,type,amount_usd,charged_usd,available_after_usd,description,reference');
    expect(csv).toContain('Welcome credit');
    await shot('ledger');

    await go('Overview');
    await expect.poll(() => page.getByRole('heading', { name: /^Spend, last 30 days: \$0\.4\d/ }).count()).toBe(1);
    await shot('overview');
  });

  it('keeps text at 4.5:1 and the focus outline at 3:1 on every page', async () => {
    const problems: string[] = [];
    for (const label of ['Overview', 'API keys', 'Videos', 'Chat sessions', 'Webhooks', 'Ledger']) {
      await go(label);
      await expect.poll(() => page.getByText(/^Loading /).count()).toBe(0);
      problems.push(...(await contrastProblems(label)));
    }
    expect(problems).toEqual([]);
  });

  it('fits a 375 px wide screen', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(`${app.url}/dashboard/`);
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.locator('.chart svg').waitFor();
    expect(await fitsWidth()).toBe(true);
    await shot('overview-375');
    await go('API keys');
    expect(await fitsWidth()).toBe(true);
    await shot('keys-375');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('shows a video created through the API after the page loaded, without a reload', async () => {
    testKey = (await admin('POST', `/organizations/${acmeId}/keys`, { name: 'ci-test', scopes: ['video:read', 'video:write'], mode: 'test' })).key;
    expect(testKey).toMatch(/^oc_test_/);
    await go('Videos');
    await expect.poll(() => page.getByText(/^Loading /).count()).toBe(0);
    // Nothing on the page is being made: only the list's own refresh can show the new video.
    expect(await page.locator('.badge.queued, .badge.in_progress').count()).toBe(0);
    await page.evaluate(() => ((globalThis as any).sameDocument = true));
    const created = await v1('POST', '/videos', { model: 'video-2', prompt: 'A kite over a windy beach at dusk', seconds: '4', size: '1280x720' }, testKey);
    expect(created.status).toBe(200);
    const { id } = (await created.json()) as { id: string };
    const item = page.locator(`[data-video-id="${id}"]`);
    await expect.poll(() => item.count(), { timeout: 15_000, interval: 250 }).toBe(1);
    await expect.poll(() => item.locator('.badge').textContent(), { timeout: 15_000, interval: 250 }).toBe('completed');
    expect(await page.evaluate(() => (globalThis as any).sameDocument)).toBe(true);
  });

  it("shows no cost for a test key's video nor a failed one, and the price of a charged one", async () => {
    const failing = await v1('POST', '/videos', { model: 'video-2', prompt: 'A lighthouse in a storm [sim:fail=generation_failed]', seconds: '4', size: '1280x720' });
    const { id: failedId } = (await failing.json()) as { id: string };
    const status = async () => ((await (await v1('GET', `/videos/${failedId}`)).json()) as { status: string }).status;
    await expect.poll(status, { timeout: 15_000, interval: 250 }).toBe('failed');
    // Loaded afresh, not by the list's refresh; moving within the app, as reloading could cut a refresh's answer short.
    await go('Overview');
    await go('Videos');
    const failed = page.locator(`[data-video-id="${failedId}"]`);
    expect(await failed.locator('.badge').textContent()).toBe('failed');
    expect(await failed.getByTestId('cost').textContent()).toBe('Not charged (failed)');
    expect(await page.locator('.video', { hasText: 'A kite over a windy beach' }).getByTestId('cost').textContent()).toBe('Not charged (test key)');
    expect(await page.locator('.video', { hasText: 'A paper boat' }).getByTestId('cost').textContent()).toBe('$0.40');
    await shot('videos-costs');
  });

  it('never lets an answer overtaken by a newer one bring back a deleted video', async () => {
    const kite = page.locator('.video', { hasText: 'A kite over a windy beach' });
    const list = /\/console\/v1\/videos\?/;
    let stale: Request | undefined;
    let answerStale!: () => void;
    const held = new Promise<void>((resolve) => (answerStale = resolve));
    let holding = true;
    // The next refresh reads the list while the video is still there; its answer is held until after the delete.
    await page.route(list, async (route) => {
      if (!holding) return route.continue();
      holding = false;
      const before = await route.fetch();
      stale = route.request();
      await held;
      await route.fulfill({ response: before });
    });
    try {
      await expect.poll(() => stale !== undefined, { timeout: 10_000 }).toBe(true);
      await kite.getByRole('button', { name: 'Delete' }).click();
      await page.getByRole('dialog', { name: 'Delete this video?' }).getByRole('button', { name: 'Delete video' }).click();
      await expect.poll(() => kite.count()).toBe(0);
      const answered = page.waitForResponse((r) => r.request() === stale);
      answerStale();
      await answered;
      // Two frames: time for the page to have read and shown the held answer, if it were to show it.
      await page.evaluate(() => new Promise((resolve) => (globalThis as any).requestAnimationFrame(() => (globalThis as any).requestAnimationFrame(resolve))));
      expect(await kite.count()).toBe(0);
    } finally {
      answerStale();
      await page.unroute(list);
    }
  });

  it("keeps a dialog's error for the try that failed: opened again, it has none", async () => {
    const failed = page.locator('.video', { hasText: 'A lighthouse in a storm' });
    const id = await failed.getAttribute('data-video-id');
    expectedErrors.push(new RegExp(`status of 503.*console/v1/videos/${id}`));
    await page.route(`**/console/v1/videos/${id}`, failWith503, { times: 1 });
    await failed.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this video?' });
    await dialog.getByRole('button', { name: 'Delete video' }).click();
    await expect.poll(() => dialog.getByRole('alert').textContent()).toContain('service_unavailable');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await failed.getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => dialog.getByRole('alert').count()).toBe(0);
    await dialog.getByRole('button', { name: 'Delete video' }).click();
    await expect.poll(() => failed.count()).toBe(0);
  });

  it('clears a failed load’s error once trying again succeeds', async () => {
    expectedErrors.push(/status of 503.*console\/v1\/key-usage/);
    const usage = /\/console\/v1\/key-usage\?/;
    let failing = true;
    await page.route(usage, (route) => (failing ? failWith503(route) : route.continue()));
    try {
      await go('API keys');
      await expect.poll(() => page.getByRole('alert').textContent()).toContain('service_unavailable');
      failing = false;
      await page.getByRole('alert').getByRole('button', { name: 'Try again' }).click();
      await expect.poll(() => page.getByRole('alert').count()).toBe(0);
      expect(await page.locator('tr', { hasText: key.slice(0, 12) }).getByTestId('requests-per-day').textContent()).toMatch(/^(<0\.1|[\d.,]+)$/);
    } finally {
      await page.unroute(usage);
    }
  });

  it("drops the error of the transcript it leaves: the next one's load shows none", async () => {
    expectedErrors.push(/404.*chat\/sessions\/chat_doesnotexist/);
    await page.waitForLoadState('networkidle');
    await page.goto(`${app.url}/dashboard/chat/chat_doesnotexist`);
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('resource_not_found');
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    const transcript = `**/console/v1/chat/sessions/${chatSessionId}`;
    await page.route(transcript, async (route) => {
      await held;
      await route.continue();
    });
    try {
      await page.getByRole('link', { name: new RegExp(chatSessionId) }).click();
      // Still loading the transcript asked for: the other one's "not found" is not this one's.
      await expect.poll(() => page.getByRole('alert').count()).toBe(0);
      expect(await page.getByText('Loading the transcript…').count()).toBe(1);
      answer();
      await page.getByText('How do I start a community garden?').waitFor();
    } finally {
      answer();
      await page.unroute(transcript);
    }
  });

  it("shows a key's small use as a daily average above 0, and its table fits 1280 px and 375 px", async () => {
    // The widest row the table must hold: a long name without spaces and every scope.
    const wide = await admin('POST', `/organizations/${acmeId}/keys`, { name: 'nightly-reconciliation-worker-eu-west-1-production', scopes: [...SCOPES] });
    await go('API keys');
    const row = page.locator(`tr[data-key-id="${wide.id}"]`);
    await row.waitFor();
    // The test key made one or two requests today, which the next read of key usage counts.
    const testRow = page.locator('tr', { hasText: testKey.slice(0, 12) });
    const today = async () => {
      // Every answer read before the page goes (the OpenAPI check reads each one).
      await page.waitForLoadState('networkidle');
      await page.reload();
      await testRow.waitFor();
      return Number(await testRow.getByTestId('requests-today').textContent());
    };
    await expect.poll(today, { timeout: 10_000 }).toBeGreaterThan(0);
    const requests = Number(await testRow.getByTestId('requests-today').textContent());
    const average = await testRow.getByTestId('requests-per-day').textContent();
    expect(average).not.toBe('0');
    expect(Number(average)).toBeCloseTo(requests / 7, 1);
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 800 });
      const fit = await page.evaluate(() => {
        const { document: doc, innerWidth } = globalThis as any;
        const wrap = doc.querySelector('.table-wrap');
        return { page: doc.documentElement.scrollWidth - innerWidth, table: wrap.scrollWidth - wrap.clientWidth };
      });
      expect(fit.page, `the page, at ${width} px`).toBeLessThanOrEqual(0);
      expect(fit.table, `the keys table, at ${width} px`).toBeLessThanOrEqual(0);
      expect(await fitsWidth()).toBe(true);
      await shot(`keys-wide-${width}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('revokes the key after a confirmation, and the next API call gets 401', async () => {
    await go('API keys');
    const row = page.locator('tr', { hasText: key.slice(0, 12) });
    // The calls made with it above are counted: last used, and requests today.
    expect(await row.getByTestId('last-used').textContent()).not.toBe('—');
    expect(Number(await row.getByTestId('requests-today').textContent())).toBeGreaterThan(0);
    expect(await row.getByTestId('requests-per-day').textContent()).not.toBe('0');
    await row.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke “ci”?' });
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await expect.poll(() => row.locator('.badge').textContent()).toBe('revoked');
    const after = await v1('GET', '/account/balance');
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  });

  it("shows another organization's member none of the first one's data", async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the OC console' }).waitFor();
    await page.setViewportSize({ width: 375, height: 800 });
    await signIn('bob@globex.test');
    expect(await page.getByText('Globex · bob@globex.test').isVisible()).toBe(true);
    await expect.poll(() => page.getByTestId('available').textContent()).toBe('$0.00');
    for (const [label, empty] of [
      ['API keys', 'No keys yet.'],
      ['Videos', 'No videos yet.'],
      ['Chat sessions', 'No chat sessions yet.'],
      ['Webhooks', 'No webhooks yet.'],
      ['Ledger', 'No entries yet.'],
    ] as const) {
      await go(label);
      await page.getByText(empty, { exact: false }).waitFor();
      expect(await fitsWidth()).toBe(true);
    }
    // Ada's transcript by its address: as absent as one that never existed.
    expectedErrors.push(new RegExp(`404.*chat/sessions/${chatSessionId}`));
    await page.goto(`${app.url}/dashboard/chat/${chatSessionId}`);
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('resource_not_found');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  it('lets an operator sign in with the admin token, see every organization and add credit', async () => {
    expect(await contrastProblems('Sign-in')).toEqual([]);
    await page.getByRole('button', { name: 'Sign in as an operator' }).click();
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor();
    await page.getByRole('link', { name: 'Globex' }).waitFor();
    expect(await contrastProblems('Organizations')).toEqual([]);
    await shot('organizations');
    await page.getByRole('link', { name: 'Acme' }).click();
    await page.getByRole('heading', { level: 1, name: 'Acme' }).waitFor();
    await page.getByLabel('Amount (USD)').fill('5');
    await page.getByRole('button', { name: 'Add credit…' }).click();
    await page.getByRole('dialog', { name: 'Add $5.00 to Acme?' }).getByRole('button', { name: 'Add credit', exact: true }).click();
    await expect.poll(() => page.locator('.card', { hasText: 'Available' }).locator('.figure').textContent()).toMatch(/^\$14\.\d\d$/);
    await page.getByText('Ada · ada@acme.test').waitFor();
    await shot('organization');
  });

  it('lets an operator create an organization, make it enterprise and give it a custom limit', async () => {
    await page.getByRole('link', { name: 'All organizations' }).click();
    await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor();
    await page.getByLabel('Name').fill('Initech');
    await page.getByRole('combobox', { name: 'Tier', exact: true }).selectOption('standard');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('link', { name: 'Initech' }).click();
    await page.getByRole('heading', { level: 1, name: 'Initech' }).waitFor();
    const limit = (name: string) => page.getByTestId(`limit-${name}`).textContent();
    // Standard's figures until the tier changes.
    await expect.poll(() => limit('requests_per_minute')).toBe('100');
    expect(await page.locator('.figure.tier').textContent()).toBe('standard');

    await page.getByRole('combobox', { name: 'Tier', exact: true }).selectOption('enterprise');
    await page.getByRole('button', { name: 'Change tier…' }).click();
    await page.getByRole('dialog', { name: 'Move Initech from standard to enterprise?' }).getByRole('button', { name: 'Change to enterprise' }).click();
    await expect.poll(() => page.locator('.figure.tier').textContent()).toBe('enterprise');
    await expect.poll(() => limit('requests_per_minute')).toBe('2,000');

    await page.getByRole('textbox', { name: 'requests per minute', exact: true }).fill('45');
    await page.getByRole('textbox', { name: 'chat tokens per day', exact: true }).fill('250000');
    await page.getByRole('button', { name: 'Set limits' }).click();
    await expect.poll(() => limit('requests_per_minute')).toBe('45');
    expect(await limit('chat_tokens_per_day')).toBe('250,000');
    // What the page shows is what the API holds: the new organization's limits, the others the tier's.
    const [initech] = (await admin('GET', '/organizations?limit=100')).data.filter((o: { name: string }) => o.name === 'Initech');
    expect(initech).toMatchObject({ tier: 'enterprise', limits: { requests_per_minute: 45, chat_tokens_per_day: 250_000, requests_per_day: 1_000_000 } });
    expect(await contrastProblems('Organization')).toEqual([]);
    await shot('organization-enterprise');
  });

  it('logged no error in the browser console', () => {
    expect(consoleErrors).toEqual([]);
  });

  it('was answered only as the OpenAPI document says, on every API call the browser made', async () => {
    const problems = (await Promise.all(answers)).filter((p) => p !== undefined);
    expect(problems).toEqual([]);
    expect(answers.length).toBeGreaterThan(50);
  });
});

/**
 * In the page: `text` lists text below 4.5:1 (3:1 when large); `focus` checks the focused element's outline
 * (`done` once Tab has come back round); `reset` forgets the elements seen and moves the start of the Tab
 * order to the top of the page.
 */
function auditContrast(mode: 'text' | 'focus' | 'reset'): string[] {
  // This runs in the browser; the test's own TypeScript has no DOM types.
  const g = globalThis as any;
  const rgba = (css: string): number[] => {
    const [r = 0, gr = 0, b = 0, a = 1] = (css.match(/[\d.]+/g) ?? []).map(Number);
    return [r, gr, b, a];
  };
  const over = (top: number[], below: number[]) => [0, 1, 2].map((i) => top[i]! * top[3]! + below[i]! * (1 - top[3]!)).concat(1);
  const luminance = (c: number[]) =>
    [0, 1, 2]
      .map((i) => c[i]! / 255)
      .map((v) => (v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
      .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i]!, 0);
  const ratio = (a: number[], b: number[]) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi! + 0.05) / (lo! + 0.05);
  };
  const background = (element: any): number[] => {
    const layers: number[][] = [];
    for (let e = element; e; e = e.parentElement) {
      const layer = rgba(g.getComputedStyle(e).backgroundColor);
      if (layer[3]! > 0) layers.push(layer);
      if (layer[3] === 1) break;
    }
    return layers.reverse().reduce((below, top) => over(top, below), [255, 255, 255, 1]);
  };
  const hex = (c: number[]) => `#${c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, '0')).join('')}`;
  const label = (e: any) => `${e.tagName.toLowerCase()} "${(e.textContent || e.value || e.getAttribute('aria-label') || e.id || '').trim().slice(0, 30)}"`;

  if (mode === 'reset') {
    g.focusSeen = new g.WeakSet();
    // Focusing the body (focusable for a moment) is what makes the next Tab start from the top.
    const body = g.document.body;
    body.tabIndex = -1;
    body.focus();
    body.removeAttribute('tabindex');
    return [];
  }
  if (mode === 'focus') {
    const e = g.document.activeElement;
    if (!e || e === g.document.body || g.focusSeen.has(e)) return ['done'];
    g.focusSeen.add(e);
    const style = g.getComputedStyle(e);
    if (style.outlineStyle === 'none' || parseFloat(style.outlineWidth) < 2) return [`focus on ${label(e)}: no outline`];
    // The outline is drawn outside the element (offset), over its parent's background.
    const bg = background(e.parentElement);
    const outline = rgba(style.outlineColor);
    const got = ratio(outline, bg);
    return got < 3 ? [`focus on ${label(e)}: ${got.toFixed(2)}:1, ${hex(outline)} on ${hex(bg)}`] : [];
  }
  const problems: string[] = [];
  for (const e of g.document.querySelectorAll('body *')) {
    const ownText = [...e.childNodes].some((n: any) => n.nodeType === 3 && n.textContent.trim() !== '');
    const field = e.matches('input:not([type=checkbox]):not([type=radio]):not([type=hidden]), select, textarea');
    if (!ownText && !field) continue;
    const rect = e.getBoundingClientRect();
    const style = g.getComputedStyle(e);
    // Out of sight, for screen readers only, or disabled (WCAG leaves inactive controls out).
    if (rect.width <= 1 || rect.height <= 1 || style.visibility === 'hidden' || e.closest(':disabled, .visually-hidden')) continue;
    // A chart's labels are SVG text, coloured by `fill` over the chart's background.
    const svg = e.closest('svg');
    const bg = background(svg ?? e);
    const fg = over(rgba(svg ? style.fill : style.color), bg);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    const got = ratio(fg, bg);
    if (got < (large ? 3 : 4.5)) problems.push(`text ${label(e)}: ${got.toFixed(2)}:1, ${hex(fg)} on ${hex(bg)}`);
  }
  return problems;
}

/**
 * The operators' Providers page against a running service: each model's deployments with their circuits, the
 * usage report after a paid request, and nothing of it for a member.
 */
describe.skipIf(!chromiumInstalled())('the console’s Providers page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let key = '';
  const consoleErrors: string[] = [];
  /** Every API answer the browser got, checked against the OpenAPI document: what failed to match. */
  const answers: Promise<string | undefined>[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  const wider = () =>
    page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return {
        scrollWidth: doc.documentElement.scrollWidth as number,
        innerWidth: innerWidth as number,
        outside: [...doc.querySelectorAll('body *')]
          .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.table-wrap'))
          .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`),
      };
    });
  const deploymentRow = (model: string) =>
    page
      .locator('tbody tr')
      .filter({ has: page.getByRole('cell', { name: model, exact: true }) })
      .filter({ has: page.getByRole('cell', { name: 'simulator', exact: true }) });

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-providers-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', CHAT_SIMULATOR_WORD_DELAY_MS: '1' }),
    });
    const acme = await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' });
    await admin('POST', `/organizations/${acme.id}/credits`, { amount: 10 });
    await admin('POST', `/organizations/${acme.id}/members`, { email: 'ada@acme.test', password: PASSWORD });
    key = (await admin('POST', `/organizations/${acme.id}/keys`, { name: 'ci', scopes: ['chat:write'] })).key;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(`${message.text()} ${message.location().url}`);
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    page.on('response', (response) => {
      const url = new URL(response.url());
      if (url.origin !== app.url || !url.pathname.startsWith('/console/v1/')) return;
      answers.push(
        (async () => {
          // Inside the try too: an answer still arriving as the browser closes must not fail the run unobserved.
          try {
            const headers = new Headers(await response.allHeaders());
            const text = /^application\/json/.test(headers.get('content-type') ?? '') ? await response.text() : '';
            await expectConformance(app.url, response.request().method(), url, response.status(), headers, text);
            return undefined;
          } catch (error) {
            return unreadable(error) ? undefined : (error as Error).message;
          }
        })(),
      );
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('shows an operator the simulator deployment of chat-2 and video-2 with a closed circuit, at 1280 px and at 375 px', async () => {
    await page.goto(`${app.url}/dashboard/`);
    await page.getByRole('button', { name: 'Sign in as an operator' }).click();
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Providers' }).click();
    await page.getByRole('heading', { level: 1, name: 'Providers' }).waitFor();
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 900 });
      for (const model of ['chat-2', 'video-2']) {
        await expect.poll(() => deploymentRow(model).getByTestId('circuit').textContent()).toBe('closed');
      }
      await expect.poll(() => page.getByText(/^Loading /).count()).toBe(0);
      const fit = await wider();
      expect(fit.outside).toEqual([]);
      expect(fit.scrollWidth).toBeLessThanOrEqual(fit.innerWidth);
      await page.screenshot({ path: join(ARTIFACTS, `providers-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(await contrastProblems()).toEqual([]);
  });

  it('reports what a chat completion used and earned, grouped as asked', async () => {
    const chat = await fetch(`${app.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', messages: [{ role: 'user', content: 'Name three rivers.' }] }),
    });
    expect(chat.status).toBe(200);
    const { usage } = (await chat.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const usageSection = page.getByRole('region', { name: /^Usage/ });
    await usageSection.getByRole('checkbox', { name: 'Deployment' }).check();
    const row = usageSection.locator('tbody tr', { hasText: 'chat-2' });
    // The report is read from a projection: asked again until it has caught up with the capture.
    await expect
      .poll(async () => {
        await usageSection.getByRole('button', { name: 'Show usage' }).click();
        await expect.poll(() => usageSection.getByText(/^Loading /).count()).toBe(0);
        return row.count();
      })
      .toBe(1);
    expect(await usageSection.locator('thead th').allTextContents()).toEqual([
      'Model',
      'Provider',
      'Deployment',
      'Requests',
      'Input tokens',
      'Output tokens',
      'Seconds',
      'Revenue',
      'Provider cost',
      'Margin',
    ]);
    const cells = await row.locator('td').allTextContents();
    expect(cells.slice(0, 2)).toEqual(['chat-2', 'simulator']);
    expect(cells.slice(3, 7)).toEqual(['1', String(usage.prompt_tokens), String(usage.completion_tokens), '0']);
    // The simulator costs us nothing: all of the charge is margin.
    expect(cells[8]).toBe('$0.00');
    expect(cells[9]).toBe(cells[7]);
    expect(cells[7]).not.toBe('$0.00');
    await page.screenshot({ path: join(ARTIFACTS, 'providers-usage.png'), fullPage: true });
  });

  it('is not offered to a member, nor shown at its address', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Providers' }).count()).toBe(0);
    // The overview's answers are all in before the page is left, so each can be checked against the document.
    await page.waitForLoadState('networkidle');
    await page.goto(`${app.url}/dashboard/providers`);
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.getByText('simulator').count()).toBe(0);
  });

  it('logged no error in the browser console, and every answer was as the OpenAPI document says', async () => {
    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter((p) => p !== undefined)).toEqual([]);
    expect(answers.length).toBeGreaterThan(3);
  });

  /** Text at 4.5:1 and the focus outline at 3:1, as on every other page (`auditContrast`). */
  async function contrastProblems(): Promise<string[]> {
    const problems = await page.evaluate(auditContrast, 'text' as const);
    await page.evaluate(auditContrast, 'reset' as const);
    for (let presses = 0; presses < 150; presses++) {
      await page.keyboard.press('Tab');
      const step = await page.evaluate(auditContrast, 'focus' as const);
      if (step[0] === 'done') break;
      problems.push(...step);
    }
    return problems;
  }
});
