import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Io, run } from '@oc/cli';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { freePort } from './harness';
import { ensureBuilt } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');
const ADMIN_TOKEN = 'listen-admin-token-0123456789';
const PROMPT = 'A paper boat drifting down a rainy street';

/** `oc` running until `stop()`: what it printed so far, and its exit code once it is done. */
function ocRunning(env: Io['env'], argv: string[]) {
  const out = { stdout: '', stderr: '' };
  const interrupt = new AbortController();
  const done = run(argv, {
    stdout: { write: (s: string) => (out.stdout += s) },
    stderr: { write: (s: string) => (out.stderr += s) },
    env,
    interrupt: interrupt.signal,
    reconnectDelayMs: 50,
  });
  return { out, done, stop: () => (interrupt.abort(), done) };
}

async function oc(env: Io['env'], argv: string[]) {
  const out = { stdout: '', stderr: '' };
  const code = await run(argv, { stdout: { write: (s: string) => (out.stdout += s) }, stderr: { write: (s: string) => (out.stderr += s) }, env });
  return { code, ...out };
}

/**
 * The README's receiver (`services/webhook/examples/receiver.mjs`, the repository's own verifier) as its own
 * process: it answers 204 to a delivery whose signature checks out with its secret, 401 otherwise, and
 * prints the type and video id of each event it accepted.
 */
async function verifyingReceiver(secret: string) {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'services/webhook/examples/receiver.mjs')], {
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const receiver = {
    url: `http://127.0.0.1:${port}/hook`,
    accepted: '',
    close: async () => {
      child.kill();
      await once(child, 'exit');
    },
  };
  child.stdout!.on('data', (c: Buffer) => (receiver.accepted += String(c)));
  await vi.waitFor(async () => expect((await fetch(receiver.url, { method: 'POST', body: '{}' })).status).toBe(401), { timeout: 10_000 });
  return receiver;
}

/** A TCP hop between the CLI and the service that the test can cut, and keep cut until it says otherwise. */
async function cuttableProxy(target: number) {
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((client) => {
    if (down) return void client.destroy();
    const upstream = createConnection(target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined).once('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  const cutAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      down = true;
      cutAll();
    },
    restore() {
      down = false;
    },
    close: () => new Promise<void>((r) => (cutAll(), server.close(() => r()))),
  };
}

describe('oc webhooks listen, against a running service', () => {
  let app: Standalone;
  let config: ReturnType<typeof loadStandaloneConfig>;
  let dir: string;
  let env: Io['env'];
  let key: string;
  let orgId: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-listen-'));
    // Production mode, no WEBHOOK_ALLOW_PRIVATE: no webhook could be delivered to this machine's receivers.
    config = loadStandaloneConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: join(dir, 'data'),
      ADMIN_TOKEN,
      LOG_LEVEL: 'silent',
      WEBHOOK_MODE: 'production',
      SIM_VIDEO_DURATION_MS: '1500',
      SIM_VIDEO_POLL_MS: '100',
    });
    app = await startStandalone({ config });
    const admin = { OC_ADMIN_URL: app.url, OC_ADMIN_TOKEN: ADMIN_TOKEN, OC_CONFIG: join(dir, 'none.json') };
    orgId = JSON.parse((await oc(admin, ['orgs', 'create', '--name', 'Listeners', '--tier', 'enterprise', '--json'])).stdout).id;
    await oc(admin, ['credit', orgId, '20']);
    const scopes = ['video:read', 'video:write', 'webhook:read'].flatMap((s) => ['--scope', s]);
    key = JSON.parse((await oc(admin, ['keys', 'create', orgId, '--name', 'listen', ...scopes, '--json'])).stdout).key;
    env = { OC_BASE_URL: app.url, OC_API_KEY: key, OC_CONFIG: join(dir, 'profile', 'config.json') };
  });
  afterAll(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });

  const createVideo = async () => {
    const res = await fetch(`${app.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'video-2', prompt: PROMPT, seconds: '4', size: '1280x720' }),
    });
    return ((await res.json()) as { id: string }).id;
  };
  const lines = (text: string) => text.trim().split('\n').filter((l) => l.length > 0);

  it('forwards each event, signed with the secret it prints, to a receiver that verifies it; Ctrl-C stops it cleanly', async () => {
    const printed = await oc(env, ['webhooks', 'listen', '--print-secret']);
    const secret = printed.stdout.trim();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    // The same secret every time: it is kept in the profile file, readable only by its owner.
    expect((await oc(env, ['webhooks', 'listen', '--print-secret'])).stdout.trim()).toBe(secret);
    expect((await stat(env.OC_CONFIG!)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(env.OC_CONFIG!, 'utf8'))).toEqual({ webhook_listen_secret: secret });

    const receiver = await verifyingReceiver(secret);
    const listening = ocRunning(env, ['webhooks', 'listen', '--forward-to', receiver.url]);
    try {
      await vi.waitFor(() => expect(listening.out.stderr).toContain('Ready!'), { timeout: 10_000 });
      expect(lines(listening.out.stderr)).toEqual([
        `Ready! Forwarding video.processing, video.completed, video.failed events of ${orgId} to ${receiver.url} (Ctrl-C stops)`,
        `Signed with ${secret} (the same on every run; oc webhooks listen --print-secret prints it)`,
      ]);

      const video = await createVideo();
      await vi.waitFor(() => expect(lines(listening.out.stdout)).toHaveLength(2), { timeout: 20_000 });
      const [processing, completed] = lines(listening.out.stdout);
      expect(processing).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ  video\\.processing  evt_\\w+  ${video}  → 204 \\(\\d+ ms\\)$`));
      expect(completed).toMatch(new RegExp(`  video\\.completed   evt_\\w+  ${video}  → 204 \\(\\d+ ms\\)$`));
      // The verifier accepted both: it prints only what passed its signature check.
      await vi.waitFor(() => expect(lines(receiver.accepted)).toEqual([`video.processing ${video}`, `video.completed ${video}`]));
    } finally {
      expect(await listening.stop()).toBe(0);
      await receiver.close();
    }
    expect(lines(listening.out.stderr).at(-1)).toBe('Stopped; 2 events forwarded');
  });

  it('shows what the receiver answered, 401 from a receiver that holds another secret', async () => {
    const receiver = await verifyingReceiver(`whsec_${Buffer.alloc(32, 3).toString('base64')}`);
    const listening = ocRunning(env, ['webhooks', 'listen', '--forward-to', receiver.url, '--events', 'video.completed', '--json']);
    try {
      await vi.waitFor(() => expect(listening.out.stderr).toContain('Ready! Forwarding video.completed events'), { timeout: 10_000 });
      const video = await createVideo();
      await vi.waitFor(() => expect(lines(listening.out.stdout)).toHaveLength(1), { timeout: 20_000 });
      expect(JSON.parse(listening.out.stdout)).toEqual({
        event_id: expect.stringMatching(/^evt_/),
        type: 'video.completed',
        video_id: video,
        status_code: 401,
        duration_ms: expect.any(Number),
        error: null,
      });
      expect(receiver.accepted).toBe('');
    } finally {
      await listening.stop();
      await receiver.close();
    }
  });

  it('reconnects when the stream drops, and is sent with Last-Event-ID what happened meanwhile', async () => {
    const secret = (await oc(env, ['webhooks', 'listen', '--print-secret'])).stdout.trim();
    const receiver = await verifyingReceiver(secret);
    const proxy = await cuttableProxy(Number(new URL(app.url).port));
    const listening = ocRunning({ ...env, OC_BASE_URL: proxy.url }, ['webhooks', 'listen', '--forward-to', receiver.url]);
    try {
      await vi.waitFor(() => expect(listening.out.stderr).toContain('Ready!'), { timeout: 10_000 });
      const video = await createVideo();
      await vi.waitFor(() => expect(listening.out.stdout).toContain('video.processing'), { timeout: 20_000 });
      const processingId = /video\.processing\s+(evt_\w+)/.exec(listening.out.stdout)![1];

      proxy.cut();
      // While the listener cannot reach the service, the video completes.
      await vi.waitFor(async () => {
        const res = await fetch(`${app.url}/v1/videos/${video}`, { headers: { authorization: `Bearer ${key}` } });
        expect(((await res.json()) as { status: string }).status).toBe('completed');
      }, { timeout: 20_000 });
      await vi.waitFor(() => expect(listening.out.stderr).toMatch(/Connection lost \(.+\); trying again in \d+ ms\n/));
      proxy.restore();

      await vi.waitFor(() => expect(listening.out.stdout).toContain('video.completed'), { timeout: 20_000 });
      expect(listening.out.stderr).toContain(`Reconnected; resuming after ${processingId}`);
      await vi.waitFor(() => expect(lines(receiver.accepted)).toEqual([`video.processing ${video}`, `video.completed ${video}`]));
    } finally {
      expect(await listening.stop()).toBe(0);
      await proxy.close();
      await receiver.close();
    }
  });

  it('exits 1 with the API\'s message when the key may not read events, and 2 without --forward-to', async () => {
    const admin = { OC_ADMIN_URL: app.url, OC_ADMIN_TOKEN: ADMIN_TOKEN, OC_CONFIG: join(dir, 'none.json') };
    const videoOnly = JSON.parse((await oc(admin, ['keys', 'create', orgId, '--name', 'videos', '--scope', 'video:read', '--json'])).stdout).key;
    const refused = await oc({ ...env, OC_API_KEY: videoOnly }, ['webhooks', 'listen', '--forward-to', 'http://127.0.0.1:9/hook']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error: .*webhook:read.* \(insufficient_scope\)\n$/);
    const usage = await oc(env, ['webhooks', 'listen']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^error: --forward-to is required/);
    expect((await oc(env, ['webhooks', 'listen', '--forward-to', 'localhost:3000'])).stderr).toMatch(/^error: --forward-to must be an http:\/\/ or https:\/\/ URL/);
  });

  it('is told when the service shuts down, which does not wait for it, and reconnects to the service restarted', async () => {
    const secret = (await oc(env, ['webhooks', 'listen', '--print-secret'])).stdout.trim();
    const receiver = await verifyingReceiver(secret);
    const listening = ocRunning(env, ['webhooks', 'listen', '--forward-to', receiver.url]);
    try {
      await vi.waitFor(() => expect(listening.out.stderr).toContain('Ready!'), { timeout: 10_000 });
      await createVideo();
      await vi.waitFor(() => expect(listening.out.stdout).toContain('video.completed'), { timeout: 20_000 });
      const lastId = /video\.completed\s+(evt_\w+)/.exec(listening.out.stdout)![1];
      // A graceful close waits for the requests in flight: the open stream must not hold it up.
      await app.close();
      expect(listening.out.stderr).toMatch(/Connection lost \(The gateway is shutting down; reconnect with Last-Event-ID\. \(service_unavailable\)\)/);
      app = await startStandalone({ config: { ...config, PORT: Number(new URL(app.url).port) } });
      await vi.waitFor(() => expect(listening.out.stderr).toContain(`Reconnected; resuming after ${lastId}`), { timeout: 20_000 });
      // The restarted webhook service holds no events from before: the listener is told it may have missed some.
      await vi.waitFor(() => expect(listening.out.stderr).toMatch(/warning: Event evt_\w+ is no longer held/));
      const video = await createVideo();
      await vi.waitFor(() => expect(listening.out.stdout).toMatch(new RegExp(`video\\.completed   evt_\\w+  ${video}  → 204`)), { timeout: 20_000 });
      await vi.waitFor(() => expect(receiver.accepted).toContain(`video.completed ${video}`));
    } finally {
      expect(await listening.stop()).toBe(0);
      await receiver.close();
    }
  });

  it('as the installed executable, stops on SIGINT with exit code 0', async () => {
    ensureBuilt('packages/cli');
    const child = spawn(join(ROOT, 'node_modules/.bin/oc'), ['webhooks', 'listen', '--forward-to', 'http://127.0.0.1:9/hook'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += String(c)));
    await vi.waitFor(() => expect(stderr).toContain('Ready!'), { timeout: 10_000 });
    child.kill('SIGINT');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(stderr).toMatch(/Stopped; 0 events forwarded\n$/);
  });
});
