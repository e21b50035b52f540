import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SCOPES } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver, stripe } from '../../webhook/test/support';
import { deleteEventsStream, freePort, uniqueNatsPrefix } from './harness';
import { natsReachable } from './nats';
import { procStat } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');
const nats = await natsReachable();

/** Every process below `pid`, from /proc (Linux). */
async function descendants(pid: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = await procStat(entry);
    // Gone meanwhile when undefined.
    if (fields) parents.set(Number(entry), Number(fields[1]));
  }
  const found: number[] = [];
  for (let level = [pid]; level.length > 0; ) {
    const above = level;
    level = [...parents].filter(([, parent]) => above.includes(parent)).map(([child]) => child);
    found.push(...level);
  }
  return found;
}

/** Whether `pid` still runs (a zombie no longer does). */
async function running(pid: number): Promise<boolean> {
  const fields = await procStat(pid);
  return fields !== undefined && fields[0] !== 'Z';
}

/** `pnpm start:distributed` as a newcomer runs it: no variables beyond the port, data and NATS. */
describe.skipIf(!nats)('pnpm start:distributed', () => {
  let dataDir: string;
  let port: number;
  let child: ChildProcess;
  let output = '';
  let receiver: Receiver;
  let demoKey: string;
  let hook: { id: string; secret: string };
  const prefix = uniqueNatsPrefix();
  const env = () => ({
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    NATS_PREFIX: prefix,
    SIM_VIDEO_DURATION_MS: '0',
    // Paced, so that a stream is still running when the command is stopped (about 1.5 s for the one below).
    CHAT_SIMULATOR_WORD_DELAY_MS: '30',
    // The test's receiver listens on this machine.
    WEBHOOK_ALLOW_PRIVATE: '1',
  });

  /** Runs `command` (a script, or `pnpm start`'s bundle) until it prints that it listens. */
  const run = async (command: string, extra: Record<string, string> = {}) => {
    output = '';
    // As from a terminal: the command leads a process group of its own, which Ctrl-C signals as a whole. Over
    // IPC, so that the script stops its processes should this test process go away.
    child = spawn(process.execPath, [join(ROOT, command)], {
      cwd: ROOT,
      env: { ...env(), ...extra },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    await vi.waitFor(() => expect(output).toMatch(/^OC API .*listening on/m), { timeout: 120_000, interval: 100 });
  };
  const start = (extra: Record<string, string> = {}) => run('scripts/start-distributed.mjs', { LOG_LEVEL: 'info', ...extra });
  const stop = async () => {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    return (await exited)[0] as number;
  };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** A video made to completion, and its `video.completed` event as the receiver got it, checked against the secret. */
  const completedVideoDelivered = async () => {
    const video = await call('POST', '/v1/videos', { model: 'video-2', prompt: 'A paper boat', seconds: '4', size: '1280x720' });
    expect(video.status).toBe(200);
    const got = await vi.waitFor(
      () => {
        const found = receiver.received.find((r) => JSON.parse(r.rawBody).data.id === video.body.id);
        if (!found) throw new Error(`no webhook for ${video.body.id} yet`);
        return found;
      },
      { timeout: 60_000, interval: 200 },
    );
    const event = stripe.webhooks.constructEvent(got.rawBody, String(got.headers['x-service-signature']), hook.secret);
    expect(event).toMatchObject({ type: 'video.completed', data: { id: video.body.id } });
    return video.body.id as string;
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-start-distributed-'));
    port = await freePort();
    receiver = await httpReceiver();
    await start();
  }, 180_000);
  afterAll(async () => {
    if (child.exitCode === null) await stop();
    await receiver.close();
    await deleteEventsStream(prefix);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('prints what pnpm start prints, and the demo key works for chat and video through separate processes', async () => {
    expect(output).toMatch(/Admin token \(generated, kept in .*admin-token\): oc_admin_/);
    // The webhook mode, before any process starts, and as the webhook process's first log line.
    expect(output).toMatch(/^Webhooks: development mode \(the default without NODE_ENV=production\): /m);
    expect(output.indexOf('Webhooks: development mode')).toBeLessThan(output.indexOf('[webhook]'));
    expect(output.split('\n').find((line) => line.startsWith('[webhook] '))).toMatch(/ WARN Webhooks: development mode \(WEBHOOK_MODE=development\)/);
    demoKey = /^ {2}(oc_live_\S+)$/m.exec(output)![1]!;
    expect((await call('GET', '/v1/account/balance')).body).toMatchObject({ available: 10, reserved: 0 });
    const chat = await call('POST', '/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 });
    expect(chat.status).toBe(200);
    hook = (await call('POST', '/v1/webhooks', { url: receiver.url, events: ['video.completed'] })).body;
    const video = await completedVideoDelivered();
    expect((await call('GET', `/v1/videos/${video}`)).body.status).toBe('completed');
    // Every process appended to the one shared store; each service keeps its read models under its own folder.
    expect((await stat(join(dataDir, 'events.sqlite'))).isFile()).toBe(true);
    expect(((await stat(join(dataDir, 'admin-token'))).mode & 0o777).toString(8)).toBe('600');
    // The webhook secrets' key is where `pnpm start` keeps it.
    expect(((await stat(join(dataDir, 'webhook-secret-key'))).mode & 0o777).toString(8)).toBe('600');
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

  it("prefixes each process's log lines with its name, as a person reads them: time, level, message, fields", () => {
    for (const service of ['gateway', 'billing', 'chat', 'video', 'webhook']) {
      expect(output).toMatch(new RegExp(`^\\[${service}\\] \\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO ${service} listening`, 'm'));
    }
    expect(output).toMatch(/^\[gateway\] \d\d:\d\d:\d\d\.\d{3} INFO gateway listening port=\d+$/m);
    expect(output).not.toMatch(/^\[[a-z]+\] \{/m);
  });

  it('stops every process on SIGTERM once the chat stream in flight has ended and been charged, and a second start keeps the data, the webhook key and creates no second demo', async () => {
    const before = (await call('GET', '/v1/account/balance')).body.available as number;
    const stream = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'How do community gardens change a neighbourhood?' }] }),
    });
    const reader = stream.body!.getReader();
    let streamed = new TextDecoder().decode((await reader.read()).value);
    const stopped = stop();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) streamed += new TextDecoder().decode(chunk.value);
    // Billing stops after the others: the stream's charge is settled before it goes.
    expect(streamed).toMatch(/data: \[DONE\]\n\n$/);
    const usage = JSON.parse(streamed.split('\n\n').at(-3)!.slice(6)).usage as { total_tokens: number };
    expect(await stopped).toBe(0);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    // Where an earlier version of this command kept the key: it is moved to the shared place and still opens the secrets.
    const key = await readFile(join(dataDir, 'webhook-secret-key'), 'utf8');
    await rename(join(dataDir, 'webhook-secret-key'), join(dataDir, 'webhook', 'webhook-secret-key'));
    await start();
    expect(output).toMatch(/Admin token: in .*admin-token/);
    expect(output).not.toMatch(/Demo organization/);
    const after = (await call('GET', '/v1/account/balance')).body;
    // 0.08 USD per 1,000 tokens: 80 micro-USD a token.
    expect({ available: Math.round(after.available * 1e6), reserved: after.reserved }).toEqual({ available: Math.round(before * 1e6) - usage.total_tokens * 80, reserved: 0 });
    expect(await readFile(join(dataDir, 'webhook-secret-key'), 'utf8')).toBe(key);
    await expect(stat(join(dataDir, 'webhook', 'webhook-secret-key'))).rejects.toThrow();
    await completedVideoDelivered();
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

  it('on Ctrl-C, even pressed twice, stops each process once, leaves none behind and exits 0; LOG_FORMAT=json keeps the JSON lines', async () => {
    await start({ LOG_FORMAT: 'json' });
    expect(output).toMatch(/^\[gateway\] \{"level":30,/m);
    const processes = await descendants(child.pid!);
    expect(processes.length).toBeGreaterThanOrEqual(5);
    const exited = once(child, 'exit');
    // What a terminal does on Ctrl-C: SIGINT to the whole foreground process group; again while the processes close.
    process.kill(-child.pid!, 'SIGINT');
    await new Promise((r) => setTimeout(r, 20));
    process.kill(-child.pid!, 'SIGINT');
    expect(await exited).toEqual([0, null]);
    await vi.waitFor(async () => expect((await Promise.all(processes.map(running))).filter(Boolean)).toEqual([]), { timeout: 5_000, interval: 100 });
    // No process stopped before the script stopped it, and none complained while stopping.
    expect(output).not.toMatch(/stopped \(|"level":[56]0/);
  });

  it('runs on the same data as pnpm start: a webhook created under start:distributed is delivered by pnpm start', async () => {
    await run('services/standalone/dist/main.js', { LOG_LEVEL: 'warn' });
    await completedVideoDelivered();
  });
});

/** `pnpm start:distributed` on a server: as `pnpm start`, NODE_ENV=production makes no demo organization nor key. */
describe.skipIf(!nats)('pnpm start:distributed under NODE_ENV=production', () => {
  let dataDir: string;
  let child: ChildProcess;
  const prefix = uniqueNatsPrefix();
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    await deleteEventsStream(prefix);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('prints no key, makes no organization, and says how to create both with the CLI or the admin API', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-start-distributed-production-'));
    const port = await freePort();
    child = spawn(process.execPath, [join(ROOT, 'scripts/start-distributed.mjs')], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
        NATS_PREFIX: prefix,
        // Production webhook processes take the key from the environment, as every replica must share it.
        WEBHOOK_SECRET_KEY: Buffer.alloc(32, 3).toString('base64'),
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    await vi.waitFor(() => expect(output).toMatch(/^Web console: /m), { timeout: 120_000, interval: 100 });

    expect(output).not.toMatch(/oc_live_|Demo organization/);
    const token = /^Admin token \(generated, kept in .*\): (\S+)$/m.exec(output)![1]!;
    const organizations = await fetch(`http://127.0.0.1:${port}/admin/v1/organizations`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await organizations.json()) as { data: unknown[] }).data).toEqual([]);
    const tokenFile = join(dataDir, 'admin-token');
    expect(output).toContain(
      [
        'No demo organization nor key under NODE_ENV=production. Create an organization and an API key with the admin token, with the CLI:',
        `  oc login --url http://127.0.0.1:${port} --token - < ${tokenFile}`,
        '  oc orgs create --name Acme --tier standard',
      ].join('\n'),
    );
  });
});
