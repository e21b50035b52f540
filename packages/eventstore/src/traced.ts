import { inSpan, instruments } from '@oc/telemetry';
import type { EventStore } from './port';

const metrics = instruments((meter) => ({
  projectionLag: meter.createHistogram('oc.projection.lag', {
    description: 'Time from an event being stored to its projection applying it (the last event of each batch).',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] },
  }),
}));

export interface TracedEventStoreOptions {
  /** `db.system.name`: `sqlite` or `kurrentdb`. */
  system: string;
  /** The service whose projections subscribe to this store: each batch they apply is a span, and its lag measured. */
  projections?: string;
}

/** `video` of `video-abc`: the stream's category, a name of low cardinality for spans. */
const categoryOf = (streamName: string) => {
  const dash = streamName.indexOf('-');
  return dash < 0 ? streamName : streamName.slice(0, dash);
};

/**
 * The event store with spans (appends, and projection batches when `projections` is set) and the projection lag
 * metric. Only a process with telemetry on wraps its store, so the port itself costs nothing more without it.
 * An append is a child of the command's span; a projection batch applies events of many requests, so it links
 * their traces instead of joining one.
 */
export function traceEventStore(store: EventStore, options: TracedEventStoreOptions): EventStore {
  return {
    appendToStream(streamName, events, appendOptions) {
      const category = categoryOf(streamName);
      return inSpan(
        `append ${category}`,
        {
          kind: 'client',
          attributes: {
            'db.system.name': options.system,
            'db.operation.name': 'append',
            'db.collection.name': category,
            'oc.stream': streamName,
            'oc.event_types': events.map((e) => e.type),
            'oc.expected_revision': String(appendOptions.expectedRevision),
          },
        },
        async (span) => {
          const result = await store.appendToStream(streamName, events, appendOptions);
          span?.setAttribute('oc.position', result.position);
          return result;
        },
      );
    },
    readStream: (streamName, readOptions) => store.readStream(streamName, readOptions),
    readAll: (readOptions) => store.readAll(readOptions),
    headPosition: () => store.headPosition(),
    subscribeToAll(handler, subscribeOptions) {
      const service = options.projections;
      if (service === undefined) return store.subscribeToAll(handler, subscribeOptions);
      return store.subscribeToAll(
        (events) =>
          inSpan(
            `project ${service}`,
            {
              kind: 'consumer',
              links: events.map((e) => e.metadata.traceparent),
              attributes: {
                'messaging.batch.message_count': events.length,
                'oc.service': service,
                'oc.position.first': events[0]!.position,
                'oc.position.last': events.at(-1)!.position,
              },
            },
            async () => {
              metrics().projectionLag.record(Math.max(0, Date.now() - events.at(-1)!.created) / 1000, { 'oc.service': service });
              await handler(events);
            },
          ),
        subscribeOptions,
      );
    },
    ping: () => store.ping(),
    close: () => store.close(),
  };
}
