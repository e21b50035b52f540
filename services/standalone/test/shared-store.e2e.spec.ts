import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { STREAM_CATEGORIES, streamCategory } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, type RunningService } from './harness';
import { natsReachable } from './nats';

/**
 * The production topology: every service in its own process, all of them appending to ONE event store
 * (here one SQLite file in WAL mode; in production one KurrentDB). Each service's outbox relay reads the
 * whole shared log and must publish only its own streams: JetStream de-duplicates on the event id across
 * subjects, so a video event published first as `events.chat.*` would never reach the webhook service.
 */
describe.skipIf(!(await natsReachable()))('every service process on one shared event store', () => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await httpReceiver();
    service = await distributed(
      {
        SIM_VIDEO_DURATION_MS: '1000',
        SIM_VIDEO_POLL_MS: '100',
        CHAT_SIMULATOR_WORD_DELAY_MS: '1',
        WEBHOOK_MODE: 'development',
        WEBHOOK_ALLOW_PRIVATE: '1',
      },
      { sharedEventStore: true },
    );
    api = clientFor(service);
  });
  afterAll(async () => {
    await receiver?.close();
    await service?.stop();
  });

  const eventually = <T>(probe: () => Promise<T> | T) => vi.waitFor(probe, { timeout: 30_000, interval: 100 });
  const createVideo = async (key: string, prompt: string) => {
    const res = await api.call('POST', '/v1/videos', { token: key, body: { model: 'video-2', prompt, seconds: '4', size: '1280x720' } });
    expect(res.status).toBe(200);
    return res.body.id as string;
  };
  const status = async (key: string, id: string) => (await api.call('GET', `/v1/videos/${id}`, { token: key })).body.status;
  const chat = async (key: string, content: string) => {
    const res = await api.call('POST', '/v1/chat/completions', {
      token: key,
      body: { model: 'chat-2', messages: [{ role: 'user', content }] },
    });
    expect(res.status).toBe(200);
  };
  const delivered = () => receiver.received.map((r) => JSON.parse(r.rawBody) as { type: string; data: { id: string } });
  const deliveredOf = (ids: string[]) =>
    delivered()
      .filter((e) => ids.includes(e.data.id))
      .map((e) => `${e.type} ${e.data.id}`)
      .sort();

  it('delivers every webhook event of videos made alongside chats and payments', async () => {
    const { key, orgId } = await api.newCustomer({
      credit: 20,
      tier: 'enterprise',
      scopes: ['video:read', 'video:write', 'webhook:read', 'webhook:write', 'chat:read', 'chat:write'],
      key: { rate_limit_per_minute: 100_000 },
    });
    // The console's streams too: a member, and its sign-in.
    const password = 'correct horse battery staple';
    expect((await api.admin('POST', `/organizations/${orgId}/members`, { email: 'ada@shared.test', password })).status).toBe(200);
    const signIn = await fetch(`${service.url}/console/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ada@shared.test', password }),
    });
    expect(signIn.status).toBe(200);
    // The webhook process may come up after the gateway reports ready.
    await eventually(async () => {
      const hook = await api.call('POST', '/v1/webhooks', {
        token: key,
        body: { url: receiver.url, events: ['video.processing', 'video.completed', 'video.failed'] },
      });
      expect(hook.status).toBe(200);
    });

    // A create under an Idempotency-Key: its claim is a stream of the video service's own (`videokey`).
    const keyed = await fetch(`${service.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'shared-store-1' },
      body: JSON.stringify({ model: 'video-2', prompt: 'A lighthouse asked for once', seconds: '4', size: '1280x720' }),
    });
    expect(keyed.status).toBe(200);

    // Chat, billing, video and webhook events interleave in the one log while the videos run.
    const chats = chat(key, 'How do I start a community garden?');
    const completed = await createVideo(key, 'A paper boat drifting down a rainy street');
    const failed = await createVideo(key, 'A paper boat [sim:fail=generation_failed]');
    await Promise.all([chats, chat(key, 'And in winter?')]);
    await eventually(async () => expect(await status(key, completed)).toBe('completed'));
    await eventually(async () => expect(await status(key, failed)).toBe('failed'));

    await eventually(() =>
      expect(deliveredOf([completed, failed])).toEqual(
        [`video.processing ${completed}`, `video.completed ${completed}`, `video.processing ${failed}`, `video.failed ${failed}`].sort(),
      ),
    );

    // Really one store: every service's streams are in the one file, and no service opened one of its own.
    const dataDir = service.dataDir!;
    for (const name of ['billing', 'chat', 'video', 'webhook']) expect(existsSync(join(dataDir, name, 'events.sqlite'))).toBe(false);
    const log = openSqliteStores(join(dataDir, 'events.sqlite'));
    try {
      const categories = new Set((await log.store.readAll({ maxCount: 100_000 })).map((event) => streamCategory(event.streamName)));
      // Stripe's top-ups and auto-recharge, and billing's alert settings, are not part of this scenario (their own
      // suites run them on this store); every other category is written here.
      const elsewhere = new Set(['payment', 'autorecharge', 'billingalerts']);
      for (const owned of Object.values(STREAM_CATEGORIES)) for (const category of owned) if (!elsewhere.has(category)) expect(categories).toContain(category);
    } finally {
      await log.close();
    }
  });

  it('still delivers every event after all the processes restart on the same store', async () => {
    const { key } = await api.newCustomer({
      credit: 20,
      tier: 'enterprise',
      scopes: ['video:read', 'video:write', 'webhook:write', 'chat:write'],
      key: { rate_limit_per_minute: 100_000 },
    });
    await eventually(async () => {
      const hook = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['video.completed'] } });
      expect(hook.status).toBe(200);
    });
    await service.restart();
    await chat(key, 'Once upon a time');
    const video = await createVideo(key, 'A lighthouse at dusk');
    await eventually(async () => expect(await status(key, video)).toBe('completed'));
    await eventually(() => expect(deliveredOf([video])).toEqual([`video.completed ${video}`]));
  });
});
