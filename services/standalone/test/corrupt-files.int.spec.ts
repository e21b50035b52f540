import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { startStandalone } from '../src/standalone';

const ROOT = resolve(import.meta.dirname, '../../..');
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function dataDir() {
  const dir = await mkdtemp(join(tmpdir(), 'oc-corrupt-'));
  dirs.push(dir);
  return dir;
}

/** The warnings a start logs, one message each. */
function warnings() {
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line).msg) });
  return { logger, lines };
}

/**
 * The snapshots and the read models are caches of the event log: random bytes in any of them must not stop a
 * start. Each is moved aside with one warning and rebuilt from the log; only a corrupt log stops the start.
 */
describe('a start over corrupt files', () => {
  it('moves a corrupt snapshot file and read models aside, says so once each, and rebuilds them from the log', async () => {
    const dir = await dataDir();
    const config = loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, LOG_LEVEL: 'silent' });
    const first = await startStandalone({ config, demo: true });
    const key = first.demo!.key;
    await first.close();

    const garbled = ['snapshots.sqlite', ...['billing', 'chat', 'video', 'webhook'].map((s) => join('read-models', `${s}.sqlite`))];
    for (const file of garbled) await writeFile(join(dir, file), randomBytes(64 * 1024));
    const { logger, lines } = warnings();
    const second = await startStandalone({ config, logger });
    try {
      for (const file of garbled) {
        expect(lines.filter((line) => line.includes(join(dir, file)))).toEqual([
          expect.stringMatching(/ was corrupt \(file is not a database\): moved to .*\.corrupt-\d{4}-\d\d-\d\dT[\d-]+Z and rebuilt from the event log$/),
        ]);
      }
      // The demo organization, its key and its credit, all read models again.
      const balance = await vi.waitFor(
        async () => {
          const res = await fetch(`${second.url}/v1/account/balance`, { headers: { authorization: `Bearer ${key}` } });
          expect(res.status).toBe(200);
          return res.json();
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(balance).toMatchObject({ available: 10, reserved: 0 });
      const organizations = await fetch(`${second.url}/admin/v1/organizations`, { headers: { authorization: `Bearer ${second.adminToken}` } });
      expect(((await organizations.json()) as { data: unknown[] }).data).toHaveLength(1);
    } finally {
      await second.close();
    }
    expect((await readdir(dir)).filter((name) => name.startsWith('snapshots.sqlite.corrupt-'))).not.toHaveLength(0);
    expect((await readdir(join(dir, 'read-models'))).filter((name) => name.includes('.sqlite.corrupt-'))).not.toHaveLength(0);
  });

  it('stops on a corrupt event log, with one line saying so and no stack trace', async () => {
    const dir = await dataDir();
    await writeFile(join(dir, 'events.sqlite'), randomBytes(64 * 1024));
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'services/standalone/src/main.ts')], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(65);
    expect(stderr.split('\n').filter((line) => line.length > 0)).toEqual([
      `The event log ${join(dir, 'events.sqlite')} is corrupt (file is not a database); nothing was started. It is the source of truth: restore it from a backup (the snapshots and read models beside it are caches, rebuilt from it at the next start).`,
    ]);
    expect(stdout).toBe('');
  });
});
