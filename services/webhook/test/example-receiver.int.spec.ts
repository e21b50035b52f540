import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HttpWebhookSender } from '../src/adapters/http-sender';
import { signedRequest } from '../src/domain/signature';
import { completedVideo } from './support';

const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const PORT = 40_000 + Math.floor(Math.random() * 10_000);
const url = `http://127.0.0.1:${PORT}/`;
const sender = new HttpWebhookSender({ timeoutMs: 2_000, maxResponseBytes: 1_024, destinations: { allowLoopback: true, allowCidrs: [] } });
const envelope = (id: string) => ({ id, type: 'video.completed' as const, created: 1, data: completedVideo() });
const now = () => Math.floor(Date.now() / 1000);

/** The ten-line receiver the README shows, run as its own process against real signed deliveries. */
describe('the README receiver', () => {
  let child: ChildProcess;
  let output = '';
  beforeAll(async () => {
    child = spawn(process.execPath, [resolve(import.meta.dirname, '../examples/receiver.mjs')], {
      env: { ...process.env, WEBHOOK_SECRET: SECRET, PORT: String(PORT) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout!.on('data', (c: Buffer) => (output += String(c)));
    await vi.waitFor(async () => expect((await sender.send({ url, body: '{}', headers: {} })).statusCode).toBe(401), { timeout: 10_000 });
  });
  afterAll(async () => {
    child.kill();
    await once(child, 'exit');
  });

  it('accepts a signed delivery once, de-duplicates a redelivery, and refuses a bad signature or an old timestamp', async () => {
    const first = signedRequest(url, envelope('evt_1'), [SECRET], now(), 1, 'test');
    expect((await sender.send(first)).statusCode).toBe(204);
    expect((await sender.send(signedRequest(url, envelope('evt_1'), [SECRET], now(), 2, 'test'))).statusCode).toBe(204);
    expect((await sender.send(signedRequest(url, envelope('evt_2'), ['whsec_other', SECRET], now(), 1, 'test'))).statusCode).toBe(204);
    expect((await sender.send(signedRequest(url, envelope('evt_3'), ['whsec_other'], now(), 1, 'test'))).statusCode).toBe(401);
    expect((await sender.send(signedRequest(url, envelope('evt_4'), [SECRET], now() - 301, 1, 'test'))).statusCode).toBe(401);
    expect((await sender.send({ ...first, body: first.body.replace('evt_1', 'evt_5') })).statusCode).toBe(401);
    await vi.waitFor(() => expect(output.trim().split('\n')).toEqual(['video.completed video_abc', 'video.completed video_abc']));
  });
});
