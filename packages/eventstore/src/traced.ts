import { type Attributes, inSpan, instruments } from '@oc/telemetry';
import { eventStoreMetrics } from './metrics';
import { type EventStore, WrongExpectedRevisionError } from './port';

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
 * The event store with spans (appends, and projection batches when `projections` is set), the append metrics and
 * the projection lag metric. Only a process with telemetry on wraps its store, so the port itself costs nothing
 * more without it. An append is a child of the command's span; a projection batch applies events of many
 * requests, so it links their traces instead of joining one. Measured here, at the port, every adapter's appends
 * are measured alike.
 */
export function traceEventStore(store: EventStore, options: TracedEventStoreOptions): EventStore {
  // Made once per stream category (a handful), so that recording an append allocates nothing.
  const labels = new Map<string, { ok: Attributes; failed: Map<string, Attributes> }>();
  const labelsOf = (category: string) => {
    let found = labels.get(category);
    if (!found) labels.set(category, (found = { ok: { 'db.system.name': options.system, 'db.collection.name': category }, failed: new Map() }));
    return found;
  };
  const failedLabels = (category: string, error: unknown) => {
    const of = labelsOf(category);
    // Error classes are few (WrongExpectedRevisionError for a conflict); anything else thrown is OpenTelemetry's `_OTHER`.
    const type = error instanceof Error ? error.name : '_OTHER';
    let found = of.failed.get(type);
    if (!found) of.failed.set(type, (found = { ...of.ok, 'error.type': type }));
    return found;
  };
  return {
    appendToStream(streamName, events, appendOptions) {
      const category = categoryOf(streamName);
      const started = performance.now();
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
          const appends = eventStoreMetrics();
          const result = await store.appendToStream(streamName, events, appendOptions).catch((error: unknown) => {
            appends.appendDuration.record((performance.now() - started) / 1000, failedLabels(category, error));
            if (error instanceof WrongExpectedRevisionError) appends.conflicts.add(1, labelsOf(category).ok);
            throw error;
          });
          const { ok } = labelsOf(category);
          appends.appendDuration.record((performance.now() - started) / 1000, ok);
          appends.appended.add(events.length, ok);
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
