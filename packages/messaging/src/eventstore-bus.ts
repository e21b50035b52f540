import { Logger } from '@nestjs/common';
import type { CheckpointStore, EventStore, StoredEvent, Subscription } from '@oc/eventstore';
import { telemetryEnabled } from '@oc/telemetry';
import type { DurableEventBus, EventFilter } from './port';
import { describe, exponentialBackoff, subscribeCheckpointed, type EventErrorHandler, type RetryDelay } from './retry';
import { processEvent } from './tracing';

type EventHandler = (event: StoredEvent) => Promise<void>;

export const defaultOnError = (logger: Logger): EventErrorHandler => (error, events) =>
  logger.warn(`Handler failed on ${describe(events)}, will retry: ${String(error)}`);

export interface EventStoreEventBusOptions {
  /** The log of each service whose events can be consumed, by service name. */
  eventStores: Readonly<Record<string, EventStore>>;
  checkpoints: CheckpointStore;
  retryDelay?: RetryDelay;
  onError?: EventErrorHandler;
}

/**
 * The embedded `DurableEventBus`: a checkpointed subscription to the source service's event store,
 * checkpoint name = consumer name. A failing handler is retried on the same event with back-off;
 * later events wait, so nothing is skipped.
 */
export class EventStoreEventBus implements DurableEventBus {
  private readonly logger = new Logger(EventStoreEventBus.name);

  constructor(private readonly options: EventStoreEventBusOptions) {}

  async consume(consumerName: string, filter: EventFilter, handler: EventHandler): Promise<Subscription> {
    const eventStore = this.options.eventStores[filter.service];
    if (!eventStore) throw new Error(`No event store registered for service "${filter.service}"`);
    const types = new Set(filter.types);
    let handled = -1;
    return subscribeCheckpointed({
      eventStore,
      checkpoints: this.options.checkpoints,
      name: consumerName,
      handle: async (events) => {
        let concerned = false;
        for (const event of events) {
          // A retried batch starts again at its failed event, not at its first.
          if (event.position <= handled) continue;
          if (types.has(event.type)) {
            if (!telemetryEnabled()) await handler(event);
            else await processEvent('eventstore', `${filter.service}.${event.type}`, consumerName, event, undefined, () => handler(event));
            concerned = true;
          }
          handled = event.position;
        }
        return concerned;
      },
      retryDelay: this.options.retryDelay ?? exponentialBackoff(),
      onError: this.options.onError ?? defaultOnError(this.logger),
    });
  }
}
