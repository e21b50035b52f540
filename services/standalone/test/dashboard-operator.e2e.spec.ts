import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { watchConsole } from './console-browser';

const ADMIN_TOKEN = 'dashboard-operator-admin-token-0123456789';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');
const HOOK_URL = 'http://127.0.0.1:9/hooks/acme';
/** As the console shows money: cents, or six decimals for an amount under one cent. */
const usd = (amount: number) =>
  new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: 'USD',
    minimumFractionDigits: 2,
    maximumFractionDigits: amount !== 0 && Math.abs(amount) < 0.01 ? 6 : 2,
  }).format(amount);

/** The operator's organization page (issue 30): search, balances, everything about one organization, credit and tier confirmed. */
describe.skipIf(!chromiumInstalled())('the operator’s organization page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let acmeId: string;
  let keyPrefix: string;
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
  const balance = async () => (await admin('GET', `/organizations/${acmeId}/balance`)) as { available: number; reserved: number };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  /** Nothing but a table's own scrolling box is wider than the window. */
  const fitsWidth = () =>
    page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return [...doc.querySelectorAll('body *')]
        .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.table-wrap'))
        .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
  const rowTexts = (table: string) =>
    page
      .getByRole('table', { name: table })
      .locator('tbody tr')
      .evaluateAll((rows): string[] => rows.map((row) => (row as any).innerText.replace(/\s+/g, ' ').trim()));
  const status = () => page.locator('.ok[role="status"]').textContent();

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-operator-'));
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        CHAT_SIMULATOR_WORD_DELAY_MS: '1',
        WEBHOOK_ALLOW_PRIVATE: '1',
      }),
    });
    acmeId = (await admin('POST', '/organizations', { name: 'Acme Studios', tier: 'standard' })).id;
    await admin('POST', '/organizations', { name: 'Acme Labs', tier: 'free' });
    await admin('POST', '/organizations', { name: 'Globex', tier: 'standard' });
    await admin('POST', `/organizations/${acmeId}/credits`, { amount: 10, description: 'Opening credit' });
    const backend = await admin('POST', `/organizations/${acmeId}/keys`, {
      name: 'backend',
      scopes: ['chat:write', 'webhook:write'],
      allowed_models: ['chat-2'],
    });
    keyPrefix = backend.prefix;
    await v1(backend.key, 'POST', '/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'How do I start a community garden?' }] });
    await v1(backend.key, 'POST', '/webhooks', { url: HOOK_URL, events: ['video.completed', 'video.failed'] });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    watchConsole(page, app.url, consoleErrors, answers);
    await page.goto(`${app.url}/dashboard/`);
    await page.getByRole('button', { name: 'Sign in as an operator' }).click();
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('finds an organization by the start of its name, in any case, with its balance in the list', async () => {
    await expect.poll(async () => (await rowTexts('Organizations')).length).toBe(3);
    await page.getByLabel('Search organizations').fill('acme s');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const { available } = await balance();
    expect(available).toBeLessThan(10);
    await expect.poll(() => rowTexts('Organizations')).toEqual([expect.stringMatching(/^Acme Studios org_\S+ standard \$\d+\.\d\d .+$/)]);
    expect(await page.getByTestId('org-available').textContent()).toBe(usd(available));
    await shot('operator-search');

    await page.getByLabel('Search organizations').fill('ACME');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await expect.poll(async () => (await rowTexts('Organizations')).map((row) => row.split(' org_')[0])).toEqual(['Acme Labs', 'Acme Studios']);
  });

  it("shows the organization's balance, spend, usage by key and model, keys, ledger, webhooks and members on its page", async () => {
    await page.getByRole('link', { name: 'Acme Studios' }).click();
    await page.getByRole('heading', { level: 1, name: 'Acme Studios' }).waitFor();
    const now = await balance();
    await expect.poll(() => page.getByTestId('available').textContent()).toBe(usd(now.available));

    const charged = Math.round((10 - now.available) * 1e6) / 1e6;
    await expect.poll(() => page.getByTestId('spend-total').textContent()).toBe(usd(charged));
    const today = new Date().toISOString().slice(0, 10);
    expect(await page.getByRole('list', { name: 'Spend per day' }).getByRole('listitem').allInnerTexts()).toEqual([
      expect.stringMatching(new RegExp(`^${today}\\s+\\$0\\.\\d+$`)),
    ]);
    await expect.poll(() => rowTexts('Usage by key and model')).toEqual([expect.stringMatching(/^backend chat-2 1 \d+ \d+ 0 \$0\.\d+$/)]);

    expect(await rowTexts('API keys')).toEqual([
      expect.stringMatching(new RegExp(`^backend ${keyPrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\S* chat:write webhook:write chat-2 (Never|\\d.+) Active$`)),
    ]);
    const ledger = await rowTexts('Ledger');
    // Newest first: the chat's capture and hold, then the opening credit (types shown capitalized).
    expect(ledger.map((row) => row.split(' ').find((word) => ['Credit', 'Reservation', 'Capture'].includes(word)))).toEqual(['Capture', 'Reservation', 'Credit']);
    expect(ledger.at(-1)).toMatch(/ Credit Opening credit \$10\.00 — \$10\.00$/);
    expect(await rowTexts('Webhooks')).toEqual([`${HOOK_URL} video.completed video.failed Active 0 — —`]);
    await shot('operator-organization');
  });

  it('adds credit after a confirmation naming the amount and the organization, then says so and shows the new balance', async () => {
    const before = await balance();
    await page.getByLabel('Amount (USD)').fill('2.5');
    await page.getByRole('button', { name: 'Add credit…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add $2.50 to Acme Studios?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Add credit', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    const after = await balance();
    expect(Math.round(after.available * 1e6) - Math.round(before.available * 1e6)).toBe(2_500_000);
    await expect.poll(status).toBe(`Added $2.50 to Acme Studios. Available balance: ${usd(after.available)}.`);
    expect(await page.getByTestId('available').textContent()).toBe(usd(after.available));
    expect((await rowTexts('Ledger'))[0]).toMatch(/ Credit Credit \$2\.50 — /);
  });

  it('shows a refused credit in the dialog with the service’s message, and adds nothing', async () => {
    const before = await balance();
    await page.getByLabel('Amount (USD)').fill('2000000');
    await page.getByRole('button', { name: 'Add credit…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add $2,000,000.00 to Acme Studios?' });
    await dialog.getByRole('button', { name: 'Add credit', exact: true }).click();
    await expect.poll(() => dialog.getByRole('alert').textContent()).toMatch(/amount/i);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await balance()).toEqual(before);
  });

  it('changes the tier after a confirmation naming the tier and the organization, then says so and shows its limits', async () => {
    await page.getByRole('combobox', { name: 'Tier', exact: true }).selectOption('premium');
    await page.getByRole('button', { name: 'Change tier…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Move Acme Studios from standard to premium?' });
    await dialog.getByRole('button', { name: 'Change to premium' }).click();
    await expect.poll(status).toBe('Acme Studios moved from the standard tier to the premium tier; its limits changed with it.');
    expect(await page.locator('.figure.tier').textContent()).toBe('premium');
    await expect.poll(() => page.getByTestId('limit-requests_per_minute').textContent()).toBe('500');
    expect((await admin('GET', `/organizations/${acmeId}`)).tier).toBe('premium');
    await shot('operator-tier-changed');
  });

  it('fits a 375 px wide screen, the list and the organization page', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    expect(await fitsWidth()).toEqual([]);
    await shot('operator-organization-375');
    await page.getByRole('link', { name: 'All organizations' }).click();
    await expect.poll(async () => (await rowTexts('Organizations')).length).toBe(3);
    expect(await fitsWidth()).toEqual([]);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('met no console error, and every answer matched the OpenAPI document', async () => {
    // The refused credit's 400, which Chromium reports itself.
    expect(consoleErrors.filter((e) => !/status of 400 .*\/credits$/.test(e))).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
