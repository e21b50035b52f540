import { WebhookEnvelopeSchema } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { openEventStream } from './event-stream';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

const PROMPT = 'A paper boat drifting down a rainy street';

/**
 * `GET /v1/webhooks/events/stream` against the whole service, real videos and real deliveries: the events of
 * one organization and none of another's, each the very body its webhook delivery carries, resumed after
 * Last-Event-ID, in one process and over NATS.
 */
describe.each(modes)('the webhook event stream (%s)', (_mode, start) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let receiver: Receiver;
  let ticking: NodeJS.Timeout | undefined;
  type Customer = Awaited<ReturnType<ReturnType<typeof clientFor>['newCustomer']>>;
  let owner: Customer;
  let stranger: Customer;

  beforeAll(async () => {
    receiver = await httpReceiver();
    service = await start({ SIM_VIDEO_DURATION_MS: '1000', SIM_VIDEO_POLL_MS: '100', WEBHOOK_MODE: 'development', WEBHOOK_ALLOW_PRIVATE: '1' });
    // The embedded service runs on the test's clock: keep it moving so that videos are generated.
    if (service.clock) ticking = setInterval(() => service.clock!.advance(100), 20);
    api = clientFor(service);
    const scopes = ['video:read', 'video:write', 'webhook:read', 'webhook:write'];
    owner = await api.newCustomer({ credit: 5, scopes });
    stranger = await api.newCustomer({ credit: 5, scopes });
    // Distributed, the webhook process may come up after the gateway reports ready.
    await vi.waitFor(async () => (await openEventStream(service.url, owner.key)).close(), { timeout: 30_000, interval: 200 });
  });
  afterAll(async () => {
    clearInterval(ticking);
    await service?.stop();
    await receiver?.close();
  });

  const createVideo = async (who: Customer) => {
    const res = await api.call('POST', '/v1/videos', { token: who.key, body: { model: 'video-2', prompt: PROMPT, seconds: '4', size: '1280x720' } });
    expect(res.status).toBe(200);
    return res.body.id as string;
  };

  it("carries the organization's video events, each the body its webhook delivery carries, and nothing of another organization's", async () => {
    const hook = await api.call('POST', '/v1/webhooks', {
      token: owner.key,
      body: { url: receiver.url, events: ['video.processing', 'video.completed', 'video.failed'] },
    });
    expect(hook.status).toBe(200);
    const mine = await openEventStream(service.url, owner.key);
    const theirs = await openEventStream(service.url, stranger.key);
    const ready = await mine.next();
    expect(ready?.event).toBe('ready');
    expect(JSON.parse(ready!.data!)).toMatchObject({ object: 'webhook_event_stream', organization_id: owner.orgId, resumed_after: null });
    expect((await theirs.next())?.event).toBe('ready');

    const video = await createVideo(owner);
    const processing = await mine.next();
    const completed = await mine.next();
    expect([processing?.event, completed?.event]).toEqual(['video.processing', 'video.completed']);
    for (const event of [processing!, completed!]) {
      const envelope = WebhookEnvelopeSchema.parse(JSON.parse(event.data!));
      expect(envelope).toMatchObject({ id: event.id, type: event.event, data: { id: video } });
    }
    expect(JSON.parse(completed!.data!).data).toMatchObject({ status: 'completed', progress: 100, url: expect.stringContaining(video) });

    // The same events reached the webhook: byte for byte the same bodies, under the same event ids.
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2), { timeout: 20_000 });
    for (const event of [processing!, completed!]) {
      const delivery = receiver.received.find((r) => r.headers['x-service-event-id'] === event.id);
      expect(delivery?.rawBody).toBe(event.data);
    }

    // The other organization's stream saw none of it: the first event it gets is its own video's.
    const own = await createVideo(stranger);
    const first = await theirs.next();
    expect(first?.event).toBe('video.processing');
    expect(JSON.parse(first!.data!).data.id).toBe(own);
    mine.close();
    theirs.close();
  });

  it('resumes after Last-Event-ID with what the listener missed, and says when it cannot', async () => {
    const stream = await openEventStream(service.url, owner.key, { query: '?events=video.processing' });
    await stream.next();
    const video = await createVideo(owner);
    const processing = await stream.next();
    expect(JSON.parse(processing!.data!).data.id).toBe(video);
    stream.close();

    // Away while the video completed; back with the id of the last event it had.
    await vi.waitFor(async () => expect((await api.call('GET', `/v1/videos/${video}`, { token: owner.key })).body.status).toBe('completed'), { timeout: 20_000 });
    const resumed = await openEventStream(service.url, owner.key, { lastEventId: processing!.id! });
    expect(JSON.parse((await resumed.next())!.data!).resumed_after).toBe(processing!.id);
    const missed = await resumed.next();
    expect(missed?.event).toBe('video.completed');
    expect(JSON.parse(missed!.data!).data.id).toBe(video);
    resumed.close();

    const lost = await openEventStream(service.url, owner.key, { lastEventId: 'evt_notheldanymore' });
    await lost.next();
    expect((await lost.next())?.event).toBe('gap');
    lost.close();
  });
});
