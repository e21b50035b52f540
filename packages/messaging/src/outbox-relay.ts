import { StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { natsNames } from '@oc/contracts';
import { telemetryEnabled } from '@oc/telemetry';
import type { CheckpointStore, EventStore, StoredEvent, Subscription } from '@oc/eventstore';
import { describe, exponentialBackoff, subscribeCheckpointed, type EventErrorHandler, type RetryDelay } from './retry';
import { ensureStream } from './streams';
import { publishEvent } from './tracing';
import { toNatsHeaders } from './wire';

/**
 * Creates the `EVENTS` stream, or brings an existing one to this configuration; on a cluster, `replicas` servers
 * keep it (`NATS_STREAM_REPLICAS`).
 */
export async function ensureEventsStream(jsm: JetStreamManager, prefix?: string, replicas = 1): Promise<void> {
  const names = natsNames(prefix);
  const config = {
    subjects: [names.eventSubject('*', '>')],
    storage: StorageType.File,
    num_replicas: replicas,
    // The relay republishes after a crash between publish and checkpoint; within this window
    // JetStream drops the copy by its message id. Restarts take seconds, two minutes is ample.
    duplicate_window: nanos(2 * 60_000),
  };
  await ensureStream(jsm, names.eventsStream, config);
}

export interface OutboxRelayOptions {
  /** The service whose events these are: they go to `events.<service>.<type>`. */
  service: string;
  /**
   * Whether `service` writes this stream (`ownsStream(service)` from the contracts). Only those events are
   * published: where services share one event store, the log also holds other services' events, and
   * publishing them here under this service's subject would, through JetStream's de-duplication on the
   * event id, hide them from their owner's consumers.
   */
  owns: (streamName: string) => boolean;
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  js: JetStreamClient;
  /** Checkpoint name; defaults to `outbox-relay.<service>`. */
  name?: string;
  retryDelay?: RetryDelay;
  onError?: EventErrorHandler;
  /** The deployment's `NATS_PREFIX` (default `oc`). */
  prefix?: string;
}

/**
 * Publishes every stored event of the service's own streams (its JSON) to JetStream with msgID = event id,
 * a batch at a time, and checkpoints after the publish acks. A crash in between republishes, and JetStream
 * drops the duplicates. Other services' events in the same store are skipped.
 */
export function startOutboxRelay(options: OutboxRelayOptions): Promise<Subscription> {
  const { service, js, owns } = options;
  const names = natsNames(options.prefix);
  const logger = new Logger(`OutboxRelay(${service})`);
  return subscribeCheckpointed({
    eventStore: options.eventStore,
    checkpoints: options.checkpoints,
    name: options.name ?? `outbox-relay.${service}`,
    handle: async (events) => {
      const own = events.filter((event) => owns(event.streamName));
      const publish = (event: StoredEvent) => {
        const subject = names.eventSubject(service, event.type);
        if (!telemetryEnabled()) return js.publish(subject, JSON.stringify(event), { msgID: event.id });
        // In the trace the event was stored in, carried to the consumer in the message's headers.
        return publishEvent('nats', subject, event, (trace) =>
          js.publish(subject, JSON.stringify(event), { msgID: event.id, headers: toNatsHeaders(trace) }),
        );
      };
      await Promise.all(own.map(publish));
      return own.length > 0;
    },
    retryDelay: options.retryDelay ?? exponentialBackoff(),
    onError: options.onError ?? ((error, events) => logger.warn(`Retrying ${describe(events)}: ${String(error)}`)),
  });
}
