import {
  JetStreamApiCodes,
  JetStreamApiError,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { EVENTS_STREAM, eventSubject } from '@oc/contracts';
import type { CheckpointStore, EventStore, Subscription } from '@oc/eventstore';
import { describe, exponentialBackoff, subscribeCheckpointed, type EventErrorHandler, type RetryDelay } from './retry';

/** Creates the `EVENTS` stream, or brings an existing one to this configuration. */
export async function ensureEventsStream(jsm: JetStreamManager): Promise<void> {
  const config = {
    subjects: ['events.>'],
    storage: StorageType.File,
    // The relay republishes after a crash between publish and checkpoint; within this window
    // JetStream drops the copy by its message id. Restarts take seconds, two minutes is ample.
    duplicate_window: nanos(2 * 60_000),
  };
  try {
    await jsm.streams.update(EVENTS_STREAM, config);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
    await jsm.streams.add({ name: EVENTS_STREAM, ...config });
  }
}

export interface OutboxRelayOptions {
  /** The service whose log this is: events go to `events.<service>.<type>`. */
  service: string;
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  js: JetStreamClient;
  /** Checkpoint name; defaults to `outbox-relay.<service>`. */
  name?: string;
  retryDelay?: RetryDelay;
  onError?: EventErrorHandler;
}

/**
 * Publishes every stored event (its JSON) to JetStream with msgID = event id, a batch at a time, and
 * checkpoints after the publish acks. A crash in between republishes, and JetStream drops the duplicates.
 */
export function startOutboxRelay(options: OutboxRelayOptions): Promise<Subscription> {
  const { service, js } = options;
  const logger = new Logger(`OutboxRelay(${service})`);
  return subscribeCheckpointed({
    eventStore: options.eventStore,
    checkpoints: options.checkpoints,
    name: options.name ?? `outbox-relay.${service}`,
    handle: async (events) => {
      await Promise.all(events.map((event) => js.publish(eventSubject(service, event.type), JSON.stringify(event), { msgID: event.id })));
      return true;
    },
    retryDelay: options.retryDelay ?? exponentialBackoff(),
    onError: options.onError ?? ((error, events) => logger.warn(`Retrying ${describe(events)}: ${String(error)}`)),
  });
}
