import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FakeUpstream, startFakeUpstream } from '../../chat/test/fake-upstream';
import { clientFor } from './client';
import { ADMIN_TOKEN, freePort, type RunningService } from './harness';

const ROOT = resolve(import.meta.dirname, '../../..');
const EXIT_WITH_PARENT = pathToFileURL(join(import.meta.dirname, 'exit-with-parent.mjs')).href;
/** 0.08 USD per 1,000 tokens: 80 micro-USD a token. */
const MICROS_PER_TOKEN = 80;

/** A promise the test settles when it lets the upstream go on. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * `pnpm start` (the standalone bundle) as an operator runs it and stops it, with SIGTERM: a process of the test's
 * own on data of its own, its chat served by a fake OpenAI-compatible upstream the test paces.
 */
describe('pnpm start, stopped with SIGTERM while a chat stream is in flight', () => {
  let upstream: FakeUpstream;
  let dataDir: string;
  let url: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(() => upstream?.close());
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  /** Starts the bundle on the test's data and waits until it is ready. */
  const start = async (env: Record<string, string> = {}) => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const started = spawn(process.execPath, ['--enable-source-maps', '--import', EXIT_WITH_PARENT, join(ROOT, 'services/standalone/dist/main.js')], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'warn',
        CHAT_UPSTREAM: 'openai',
        CHAT_UPSTREAM_BASE_URL: upstream.baseUrl,
        CHAT_UPSTREAM_API_KEY: 'sk-upstream',
        ...env,
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child = started;
    await vi.waitFor(
      async () => {
        if (started.exitCode !== null) throw new Error(`exited with ${started.exitCode}`);
        expect((await fetch(`${url}/readyz`)).status).toBe(200);
      },
      { timeout: 60_000, interval: 100 },
    );
    return started;
  };
  const api = () => clientFor({ mode: 'embedded', url, adminToken: ADMIN_TOKEN } as RunningService);
  const balanceMicros = async (key: string) => {
    const res = await api().call('GET', '/v1/account/balance', { token: key });
    return { available: Math.round(res.body.available * 1e6), reserved: Math.round(res.body.reserved * 1e6) };
  };
  /** A stream of "Hi", read until the upstream's first word has reached the client. */
  const streamUntilFirstWord = async (key: string) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('"content":"Hel"')) text += decoder.decode((await reader.read()).value, { stream: true });
    return {
      /** Every event of the stream, to its end. */
      async events() {
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true });
        return text
          .split('\n\n')
          .filter((block) => block.startsWith('data: '))
          .map((block) => block.slice(6))
          .map((data) => (data === '[DONE]' ? data : JSON.parse(data)));
      },
    };
  };
  const contentOf = (events: unknown[]) =>
    events.map((e) => (e as { choices?: { delta: { content?: string } }[] }).choices?.[0]?.delta.content ?? '').join('');

  it('is not ready and refuses new requests at once, lets the stream end with [DONE], charged exactly its usage, and exits 0', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-shutdown-'));
    const upstreamGoesOn = gate();
    upstream.script = [
      { content: 'Hel' },
      { gate: upstreamGoesOn.opened },
      { content: 'lo' },
      { finish: 'stop' },
      { usage: { prompt_tokens: 40, completion_tokens: 2, total_tokens: 42 } },
    ];
    const running = await start();
    const { key } = await api().newCustomer({ credit: 10, scopes: ['chat:write'] });
    const stream = await streamUntilFirstWord(key);

    const exited = once(running, 'exit');
    running.kill('SIGTERM');
    await vi.waitFor(async () => expect((await fetch(`${url}/readyz`)).status).toBe(503), { timeout: 5_000, interval: 20 });
    const refused = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('connection')).toBe('close');
    expect(await refused.json()).toEqual({ error: { type: 'service_unavailable_error', code: 'service_unavailable', message: expect.any(String) } });

    upstreamGoesOn.open();
    const events = await stream.events();
    expect(events.at(-1)).toBe('[DONE]');
    expect(contentOf(events)).toBe('Hello');
    expect(await exited).toEqual([0, null]);

    await start();
    expect(await balanceMicros(key)).toEqual({ available: 10_000_000 - 42 * MICROS_PER_TOKEN, reserved: 0 });
  });

  it('cuts a stream that outlasts SHUTDOWN_GRACE_MS with an error event, charges only what it delivered, and exits 0', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-shutdown-'));
    const never = gate();
    upstream.script = [{ content: 'Hel' }, { gate: never.opened }, { content: 'lo' }, { finish: 'stop' }];
    const running = await start({ SHUTDOWN_GRACE_MS: '300' });
    const { key } = await api().newCustomer({ credit: 10, scopes: ['chat:write'] });
    const stream = await streamUntilFirstWord(key);

    const exited = once(running, 'exit');
    running.kill('SIGTERM');
    const events = await stream.events();
    expect(contentOf(events)).toBe('Hel');
    expect(events.at(-1)).toEqual({ error: { type: 'service_unavailable_error', code: 'service_unavailable', message: expect.any(String) } });
    expect(events).not.toContain('[DONE]');
    expect(await exited).toEqual([0, null]);
    never.open();

    await start();
    // "Hi" is 1 token, with the 3 + 4 the chat format adds; "Hel", the one word delivered, is 1.
    expect(await balanceMicros(key)).toEqual({ available: 10_000_000 - (1 + 3 + 4 + 1) * MICROS_PER_TOKEN, reserved: 0 });
  });
});
