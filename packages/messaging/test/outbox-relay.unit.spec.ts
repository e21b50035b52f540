import type { JetStreamClient, PubAck } from '@nats-io/jetstream';
import { SqliteCheckpointStore, SqliteEventStore } from '@oc/eventstore';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startOutboxRelay } from '../src';

describe('outbox relay (JetStream faked)', () => {
  const store = new SqliteEventStore({ filename: ':memory:' });
  const checkpoints = new SqliteCheckpointStore(store);
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
      eventStore: store,
      checkpoints,
      js,
      retryDelay: async () => {},
      onError: () => {},
    });
    try {
      await vi.waitFor(() => expect(published).toHaveLength(1));
      const [stored] = await store.readAll({ maxCount: 1 });
      expect(published[0]).toEqual({ subject: 'events.video.VideoCreated', event: stored, msgID: 'evt-1' });
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
});
