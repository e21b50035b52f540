import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '@oc/cli';
import { afterAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { startStandalone } from '../src/standalone';

const dataDir = await mkdtemp(join(tmpdir(), 'oc-standalone-'));
const config = loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
afterAll(() => rm(dataDir, { recursive: true, force: true }));

function capture() {
  let text = '';
  return { stream: { write: (chunk: string) => ((text += chunk), true) }, text: () => text };
}

describe('standalone first start', () => {
  it('generates and keeps an admin token, and creates a usable demo organization only once', async () => {
    const first = await startStandalone({ config, demo: true });
    try {
      expect(first.adminTokenGenerated).toBe(true);
      expect((await readFile(join(dataDir, 'admin-token'), 'utf8')).trim()).toBe(first.adminToken);
      expect(first.demo?.key).toMatch(/^oc_live_/);
      const balance = await fetch(`${first.url}/v1/account/balance`, { headers: { authorization: `Bearer ${first.demo!.key}` } });
      expect(await balance.json()).toMatchObject({ available: 10, currency: 'usd', tier: 'standard' });
    } finally {
      await first.close();
    }
    const second = await startStandalone({ config, demo: true });
    try {
      expect(second.adminTokenGenerated).toBe(false);
      expect(second.adminToken).toBe(first.adminToken);
      expect(second.demo).toBeUndefined();
    } finally {
      await second.close();
    }
  });

  it('is operable end to end with the oc CLI', async () => {
    const app = await startStandalone({ config });
    const env = { OC_ADMIN_URL: app.url, OC_ADMIN_TOKEN: app.adminToken };
    const oc = async (...argv: string[]) => {
      const out = capture();
      const err = capture();
      const code = await run(argv, { stdout: out.stream, stderr: err.stream, env });
      return { code, out: out.text(), err: err.text() };
    };
    try {
      const org = JSON.parse((await oc('orgs', 'create', '--name', 'CLI Co', '--tier', 'premium', '--json')).out);
      expect(org).toMatchObject({ object: 'organization', name: 'CLI Co', tier: 'premium' });
      expect(JSON.parse((await oc('credit', org.id, '3.5', '--json')).out)).toMatchObject({ available: 3.5 });
      const created = JSON.parse((await oc('keys', 'create', org.id, '--name', 'ci', '--scope', 'chat:read', '--json')).out);
      expect(created.key).toMatch(/^oc_live_/);
      const health = await fetch(`${app.url}/v1/health`, { headers: { authorization: `Bearer ${created.key}` } });
      expect(health.status).toBe(200);
      expect((await oc('keys', 'list', org.id)).out).toContain(created.id);
      expect((await oc('keys', 'revoke', org.id, created.id)).code).toBe(0);
      const revoked = await fetch(`${app.url}/v1/health`, { headers: { authorization: `Bearer ${created.key}` } });
      expect(revoked.status).toBe(401);
      const ledger = await oc('ledger', org.id, '--json');
      expect(JSON.parse(ledger.out).data[0]).toMatchObject({ type: 'credit', amount: 3.5 });
      const premium = await oc('orgs', 'set-limits', org.id, '--requests-per-minute', '3');
      expect(premium.code).toBe(1);
      expect(premium.err).toContain('custom_limits_require_enterprise');
      expect((await oc('orgs', 'set-tier', org.id, 'enterprise')).code).toBe(0);
      expect((await oc('orgs', 'set-limits', org.id, '--requests-per-minute', '3')).out).toMatch(/requests\s+3\/minute, 1000000\/day/);
      expect((await oc('orgs', 'set-limits', org.id, '--requests-per-minute', 'default')).out).toMatch(/requests\s+2000\/minute/);
      const missing = await oc('orgs', 'get', 'org_nope');
      expect(missing.code).toBe(1);
      expect(missing.err).toContain('resource_not_found');
    } finally {
      await app.close();
    }
  });
});
