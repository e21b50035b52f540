import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { entriesUnder, filesUnder, ifStillThere } from './files';
import { ensureBuilt } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');

/**
 * What `pnpm start` runs: the bundle in `dist/`, with the scripts it starts by path (worker threads, the
 * ffmpeg helper) beside it. Only a real start of the built file shows that nothing is missing there.
 */
describe('the built standalone service', () => {
  let dataDir: string;
  let child: ChildProcess;
  let output = '';
  /** Secrets the service gave out; none may be found in what it wrote (the admin token's own file aside). */
  const secrets: string[] = [];

  beforeAll(async () => {
    ensureBuilt('services/standalone');
    dataDir = await mkdtemp(join(tmpdir(), 'oc-built-'));
    // As a directory made by hand with the usual umask would be: the service must close it.
    await chmod(dataDir, 0o755);
    child = spawn(process.execPath, [join(ROOT, 'services/standalone/dist/main.js')], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        SIM_VIDEO_DURATION_MS: '0',
        CHAT_SIMULATOR_WORD_DELAY_MS: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    await vi.waitFor(() => expect(output).toMatch(/Try it:/), { timeout: 60_000, interval: 50 });
  });

  afterAll(async () => {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('serves chat and a playable video, then stops cleanly on SIGTERM', async () => {
    const url = /listening on (http:\/\/\S+)/.exec(output)![1]!;
    const key = /(oc_live_[A-Za-z0-9_-]+)/.exec(output)![1]!;
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });

    const chat = await call('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Hello there' }] });
    expect(chat.status).toBe(200);
    expect(((await chat.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content.length).toBeGreaterThan(0);

    const created = await call('POST', '/v1/videos', { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' });
    const { id } = (await created.json()) as { id: string };
    await vi.waitFor(async () => expect(((await (await call('GET', `/v1/videos/${id}`)).json()) as { status: string }).status).toBe('completed'), {
      timeout: 60_000,
      interval: 100,
    });
    const content = await call('GET', `/v1/videos/${id}/content`);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    expect(Buffer.from(await content.arrayBuffer()).subarray(4, 8).toString()).toBe('ftyp');

    const hook = await call('POST', '/v1/webhooks', { url: 'https://hooks.example.com/oc', events: ['video.completed'] });
    expect(hook.status).toBe(200);
    secrets.push(key, ((await hook.json()) as { secret: string }).secret);

    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(output).not.toMatch(/Error|ERR_/);
  });

  it('keeps DATA_DIR to its own user: the directory 0700, everything it wrote there 0600 or 0700', async () => {
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
    const entries = (await entriesUnder(dataDir)).map((entry) => entry.path);
    expect(entries).toEqual(expect.arrayContaining(['events.sqlite', join('read-models', 'chat.sqlite')]));
    expect(entries.some((entry) => entry.endsWith('.mp4'))).toBe(true);
    const open = [];
    for (const entry of entries) {
      const found = await ifStillThere(stat(join(dataDir, entry)));
      if (!found) continue;
      const mode = found.mode & 0o777;
      if ((mode & 0o077) !== 0) open.push(`${entry} ${mode.toString(8)}`);
    }
    expect(open).toEqual([]);
  });

  it('stores API keys only as hashes and webhook secrets only sealed: no file under DATA_DIR holds either', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(2);
    for (const { path, bytes } of await filesUnder(dataDir)) {
      for (const secret of secrets) expect(bytes.includes(secret), `${path} holds a secret`).toBe(false);
    }
  });
});
