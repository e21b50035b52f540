import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { startOutput } from './start-output';
import { ensureBuilt } from './system';

/**
 * `pnpm start` on a server: NODE_ENV=production must put webhooks in production mode, and every start says in
 * its first lines which mode it runs in, so that a development start on a server is seen at once.
 */
describe("pnpm start's webhook mode", () => {
  const dirs: string[] = [];
  let receiver: Receiver;
  beforeAll(async () => {
    ensureBuilt('services/standalone');
    receiver = await httpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  /** The first two lines of a start with these variables. */
  async function firstLines(env: Record<string, string>, whileRunning?: (output: string) => Promise<void>) {
    const dataDir = await mkdtemp(join(tmpdir(), 'oc-webhook-mode-'));
    dirs.push(dataDir);
    return (await startOutput(dataDir, env, whileRunning)).split('\n').slice(0, 2);
  }

  it('is production under NODE_ENV=production, and says so on its second line', async () => {
    const [listening, webhooks] = await firstLines({ NODE_ENV: 'production' });
    expect(listening).toMatch(/^OC API .* listening on http:\/\/127\.0\.0\.1:\d+ /);
    expect(webhooks).toBe('Webhooks: production mode (NODE_ENV=production): deliveries reach public https:// addresses only');
  });

  it('is development on a developer machine, said as such, and a local receiver works when asked for', async () => {
    const [, webhooks] = await firstLines({ WEBHOOK_ALLOW_PRIVATE: '1' }, async (output) => {
      const url = /listening on (http:\/\/\S+)/.exec(output)![1]!;
      await vi.waitFor(() => expect(output).toMatch(/oc_live_/), { timeout: 10_000, interval: 50 });
      const key = /(oc_live_[A-Za-z0-9_-]+)/.exec(output)![1]!;
      const created = await fetch(`${url}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, events: ['video.completed'] }),
      });
      expect(created.status).toBe(200);
    });
    expect(webhooks).toMatch(
      /^Webhooks: development mode \(the default without NODE_ENV=production\): deliveries may reach http:\/\/ and loopback receivers \(WEBHOOK_ALLOW_PRIVATE=1\); on a server, set NODE_ENV=production or WEBHOOK_MODE=production$/,
    );
  });

  it('is development under NODE_ENV=production only when WEBHOOK_MODE=development asks for it', async () => {
    const [, webhooks] = await firstLines({ NODE_ENV: 'production', WEBHOOK_MODE: 'development' });
    expect(webhooks).toMatch(/^Webhooks: development mode \(WEBHOOK_MODE=development\): WEBHOOK_ALLOW_PRIVATE=1 would let /);
  });
});
