import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SCOPES } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { deleteEventsStream, freePort, uniqueNatsPrefix } from './harness';
import { natsReachable } from './nats';

const ROOT = resolve(import.meta.dirname, '../../..');
const nats = await natsReachable();

/** `pnpm start:distributed` as a newcomer runs it: no variables beyond the port, data and NATS. */
describe.skipIf(!nats)('pnpm start:distributed', () => {
  let dataDir: string;
  let port: number;
  let child: ChildProcess;
  let output = '';
  const prefix = uniqueNatsPrefix();

  const start = async () => {
    output = '';
    child = spawn(process.execPath, [join(ROOT, 'scripts/start-distributed.mjs')], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
        NATS_PREFIX: prefix,
        LOG_LEVEL: 'warn',
        SIM_VIDEO_DURATION_MS: '0',
        CHAT_SIMULATOR_WORD_DELAY_MS: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    await vi.waitFor(() => expect(output).toMatch(/^OC API listening on/m), { timeout: 120_000, interval: 100 });
  };
  const stop = async () => {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    return (await exited)[0] as number;
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-start-distributed-'));
    port = await freePort();
    await start();
  }, 180_000);
  afterAll(async () => {
    if (child.exitCode === null) await stop();
    await deleteEventsStream(prefix);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('prints what pnpm start prints, and the demo key works for chat and video through separate processes', async () => {
    expect(output).toMatch(/Admin token \(generated, kept in .*admin-token\): oc_admin_/);
    const key = /^ {2}(oc_live_\S+)$/m.exec(output)![1]!;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    expect((await call('GET', '/v1/account/balance')).body).toMatchObject({ available: 10, reserved: 0 });
    const chat = await call('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 });
    expect(chat.status).toBe(200);
    const video = await call('POST', '/v1/videos', { model: 'video-2', prompt: 'A paper boat', seconds: '4', size: '1280x720' });
    await vi.waitFor(async () => expect((await call('GET', `/v1/videos/${video.body.id}`)).body.status).toBe('completed'), {
      timeout: 60_000,
      interval: 200,
    });
    // Every process appended to the one shared store; each service keeps its read models under its own folder.
    expect((await stat(join(dataDir, 'events.sqlite'))).isFile()).toBe(true);
    expect(((await stat(join(dataDir, 'admin-token'))).mode & 0o777).toString(8)).toBe('600');
    const keys = await fetch(`http://127.0.0.1:${port}/admin/v1/organizations/${/Demo organization (\S+)/.exec(output)![1]}/keys`, {
      headers: { authorization: `Bearer ${/: (oc_admin_\S+)/.exec(output)![1]}` },
    }).then((res) => res.json() as Promise<any>);
    expect([...keys.data[0].scopes].sort()).toEqual([...SCOPES].sort());

    // The web console, from the gateway process: its page, and an operator's sign-in over this plain-HTTP address.
    expect(await (await fetch(`http://127.0.0.1:${port}/dashboard/`)).text()).toContain('<div id="root">');
    const signIn = await fetch(`http://127.0.0.1:${port}/console/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ admin_token: /: (oc_admin_\S+)/.exec(output)![1] }),
    });
    expect(signIn.status).toBe(200);
    expect(signIn.headers.get('set-cookie')).toMatch(/^oc_console=[^;]+; Max-Age=43200; Path=\/console\/v1; HttpOnly; SameSite=Strict$/);
  });

  it('stops every process on SIGTERM, and a second start keeps the data and creates no second demo', async () => {
    expect(await stop()).toBe(0);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    await start();
    expect(output).toMatch(/Admin token: in .*admin-token/);
    expect(output).not.toMatch(/Demo organization/);
  });

  it('stops the others, and says which, when one service dies', async () => {
    const exited = once(child, 'exit');
    // The chat process: the one running this checkout's chat bundle.
    const ps = spawn('pgrep', ['-f', join(ROOT, 'services/chat/dist/main.js')]);
    let pids = '';
    ps.stdout.on('data', (chunk: Buffer) => (pids += chunk));
    await once(ps, 'exit');
    expect(pids.trim()).not.toBe('');
    for (const pid of pids.trim().split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
    expect((await exited)[0]).toBe(1);
    expect(output).toMatch(/\[start:distributed\] chat stopped \(SIGKILL\); stopping the others/);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });
});
