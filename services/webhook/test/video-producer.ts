import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ownsStream, type VideoEventData, type VideoNotificationType } from '@oc/contracts';
import { openSqliteStores, type StoredEvent, type Subscription } from '@oc/eventstore';
import { ensureEventsStream, NatsServiceClient, startOutboxRelay } from '@oc/messaging';
import { completedVideo } from './support';

export interface VideoProducer {
  /** Appends a `Video*` event to a video stream, as the video service does. */
  emit(type: VideoNotificationType, orgId: string, video?: Partial<VideoEventData>): Promise<StoredEvent>;
  close(): Promise<void>;
}

/**
 * Stands in for the video service on its real producer path: embedded, an append to the shared SQLite
 * log; distributed, an append to a log of its own that the outbox relay publishes to JetStream as
 * `<prefix>.events.video.<type>` (the deployment's NATS_PREFIX).
 */
export async function videoProducer(target: { sqliteFile: string } | { natsUrl: string; prefix?: string }): Promise<VideoProducer> {
  let dir: string | undefined;
  let filename: string;
  if ('sqliteFile' in target) filename = target.sqliteFile;
  else {
    dir = await mkdtemp(join(tmpdir(), 'oc-video-log-'));
    filename = join(dir, 'events.sqlite');
  }
  const stores = openSqliteStores({ filename });
  let relay: Subscription | undefined;
  let client: NatsServiceClient | undefined;
  if ('natsUrl' in target) {
    client = new NatsServiceClient({ servers: target.natsUrl, prefix: target.prefix });
    const nc = await client.connection();
    await ensureEventsStream(await jetstreamManager(nc), target.prefix);
    relay = await startOutboxRelay({
      service: 'video',
      owns: ownsStream('video'),
      eventStore: stores.store,
      checkpoints: stores.checkpoints,
      js: jetstream(nc),
      prefix: target.prefix,
    });
  }
  return {
    async emit(type, orgId, video = {}) {
      const status = type === 'VideoCompleted' ? 'completed' : type === 'VideoFailed' ? 'failed' : 'in_progress';
      const data = completedVideo({ status, ...video });
      const stream = `video-${data.id}`;
      await stores.store.appendToStream(stream, [{ type, data: { org_id: orgId, video: data } }], { expectedRevision: 'any' });
      return (await stores.store.readStream(stream)).at(-1)!;
    },
    async close() {
      await relay?.stop();
      await client?.close();
      await stores.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}
