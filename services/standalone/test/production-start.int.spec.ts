import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOutput } from './start-output';
import { ensureBuilt } from './system';

/**
 * `pnpm start`'s first start on a server (NODE_ENV=production): no demo organization, and no API key in the
 * output, which a server's logs keep; instead, how to make both with the admin token.
 */
describe("pnpm start's first start under NODE_ENV=production", () => {
  let dataDir: string;
  beforeAll(async () => {
    ensureBuilt('services/standalone');
    dataDir = await mkdtemp(join(tmpdir(), 'oc-production-start-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('makes no demo organization nor key, and prints how to create them with the CLI or the admin API', async () => {
    let organizations: unknown[] = [];
    const output = await startOutput(dataDir, { NODE_ENV: 'production' }, async (printed) => {
      const url = /listening on (http:\/\/\S+)/.exec(printed)![1]!;
      const token = /^Admin token \(generated, kept in .*\): (\S+)$/m.exec(printed)![1]!;
      const res = await fetch(`${url}/admin/v1/organizations`, { headers: { authorization: `Bearer ${token}` } });
      organizations = ((await res.json()) as { data: unknown[] }).data;
    });
    expect(organizations).toEqual([]);
    expect(output).not.toMatch(/oc_live_|oc_test_|Demo organization/);
    const tokenFile = join(dataDir, 'admin-token');
    const url = /listening on (http:\/\/\S+)/.exec(output)![1]!;
    expect(output).toContain(
      [
        'No demo organization nor key under NODE_ENV=production. Create an organization and an API key with the admin token, with the CLI:',
        `  oc login --url ${url} --token - < ${tokenFile}`,
        '  oc orgs create --name Acme --tier standard',
        '  oc keys create org_… --name backend --scope video:read --scope video:write',
        'or with the admin API:',
        `  curl -s ${url}/admin/v1/organizations -H "Authorization: Bearer $(cat ${tokenFile})" -H "Content-Type: application/json" -d '{"name":"Acme","tier":"standard"}'`,
      ].join('\n'),
    );
  });

  it('says so only while there is no organization yet', async () => {
    const output = await startOutput(dataDir, { NODE_ENV: 'production' }, async (printed) => {
      const url = /listening on (http:\/\/\S+)/.exec(printed)![1]!;
      const token = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
      const created = await fetch(`${url}/admin/v1/organizations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Acme', tier: 'standard' }),
      });
      expect(created.status).toBe(200);
    });
    expect(output).toMatch(/^No demo organization nor key under NODE_ENV=production/m);
    const next = await startOutput(dataDir, { NODE_ENV: 'production' });
    expect(next).not.toMatch(/No demo organization|oc_live_/);
    expect(next).toMatch(/^Admin token: in .*admin-token$/m);
  });
});
