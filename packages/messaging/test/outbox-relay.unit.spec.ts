import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { SqliteCheckpointStore, SqliteEventStore } from '@oc/eventstore';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ownsStream } from '@oc/contracts';
import { startOutboxRelay } from '../src';

describe('outbox relay (JetStream faked)', () => {
  let store: SqliteEventStore;
  let checkpoints: SqliteCheckpointStore;
  beforeEach(() => {
    store = new SqliteEventStore({ filename: ':memory:' });
    checkpoints = new SqliteCheckpointStore(store);
  });
  afterEach(() => store.close());

  it('publishes each event under its id, retries a failed publish, and checkpoints only after the ack', async () => {
    const published: Array<{ subject: string; event: unknown; msgID: string | undefined }> = [];
    let acknowledge!: (ack: PubAck) => void;
    const publish = vi
      .fn<JetStreamClient['publish']>()
      .mockRejectedValueOnce(new Error('no responders'))
      .mockImplementationOnce((subject, payload, options) => {
        published.push({ subject, event: JSON.parse(String(payload)), msgID: options?.msgID });
        return new Promise((resolve) => (acknowledge = resolve));
      });
    const js = { publish } as unknown as JetStreamClient;
    await store.appendToStream('video-1', [{ id: 'evt-1', type: 'VideoCreated', data: { id: 'v1' } }], {
      expectedRevision: 'no_stream',
    });

    const relay = await startOutboxRelay({
      service: 'video',
      owns: ownsStream('video'),
      eventStore: store,
      checkpoints,
      js,
      retryDelay: async () => {},
      onError: () => {},
    });
    try {
      await vi.waitFor(() => expect(published).toHaveLength(1));
      const [stored] = await store.readAll({ maxCount: 1 });
      expect(published[0]).toEqual({ subject: 'oc.events.video.VideoCreated', event: stored, msgID: 'evt-1' });
      expect(await checkpoints.load('outbox-relay.video')).toBeUndefined();

      acknowledge({ stream: 'EVENTS', seq: 1, duplicate: false });
      await vi.waitFor(async () => expect(await checkpoints.load('outbox-relay.video')).toBe(stored!.position));
      expect(publish).toHaveBeenCalledTimes(2);
    } finally {
      // An unanswered publish would keep the relay's handler, and so `stop()`, waiting forever.
      acknowledge?.({ stream: 'EVENTS', seq: 1, duplicate: false });
      await relay.stop();
    }
  });

  it("publishes only the streams its service owns and moves past the others' events", async () => {
    const published: Array<{ subject: string; stream: string; msgID: string | undefined }> = [];
    const js = {
      publish: async (subject: string, payload: string, options?: { msgID?: string }) => {
        published.push({ subject, stream: (JSON.parse(payload) as { streamName: string }).streamName, msgID: options?.msgID });
        return { stream: 'EVENTS', seq: published.length, duplicate: false };
      },
    } as unknown as JetStreamClient;
    // One store shared by every service, as in production: the video relay sees all of their events.
    const append = (stream: string, type: string) => store.appendToStream(stream, [{ id: `${stream}/${type}`, type, data: {} }], { expectedRevision: 'any' });
    await append('chat-s1', 'ChatSessionStarted');
    await append('video-v1', 'VideoQueued');
    await append('apikey-k1', 'ApiKeyCreated');
    await append('account-o1', 'FundsReserved');
    await append('video-v1', 'VideoCompleted');
    await append('webhook-w1', 'WebhookCreated');
    await append('delivery-d1', 'DeliveryScheduled');
    await append('videos-x', 'NotAVideoStream');
    const last = (await store.readAll({ maxCount: 100 })).at(-1)!.position;

    const relay = await startOutboxRelay({ service: 'video', owns: ownsStream('video'), eventStore: store, checkpoints, js, onError: () => {} });
    try {
      await vi.waitFor(async () => expect(await checkpoints.load('outbox-relay.video')).toBe(last));
      expect(published).toEqual([
        { subject: 'oc.events.video.VideoQueued', stream: 'video-v1', msgID: 'video-v1/VideoQueued' },
        { subject: 'oc.events.video.VideoCompleted', stream: 'video-v1', msgID: 'video-v1/VideoCompleted' },
      ]);
    } finally {
      await relay.stop();
    }
  });
});
