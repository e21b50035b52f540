import { type Attributes, instruments, telemetryEnabled } from '@oc/telemetry';
import type { EventStore } from './port';

/**
 * The event store's own metrics (`oc.eventstore.*`): appends, group commits, and how far each reader of the log is
 * behind it. Attributes are the store (`db.system.name`), a stream's category and a reader's name: a few values
 * each, never a stream's id.
 */
export const eventStoreMetrics = instruments((meter) => ({
  appendDuration: meter.createHistogram('oc.eventstore.append.duration', {
    description: 'Each append, from being asked to its answer: the wait for its group commit included.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] },
  }),
  appended: meter.createCounter('oc.eventstore.events.appended', {
    description: 'Events stored, by stream category.',
    unit: '{event}',
  }),
  conflicts: meter.createCounter('oc.eventstore.append.conflicts', {
    description: "Appends refused because the stream had moved past the writer's expected revision (WrongExpectedRevisionError).",
    unit: '{append}',
  }),
  commitDuration: meter.createHistogram('oc.eventstore.commit.duration', {
    description: 'Each group commit of the embedded store: one transaction and its fsync, in the writer thread.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] },
  }),
  commitAppends: meter.createHistogram('oc.eventstore.commit.appends', {
    description: 'Appends written by each group commit of the embedded store.',
    unit: '{append}',
    advice: { explicitBucketBoundaries: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] },
  }),
}));

/** A reader of the log: where it is, and the log it reads. */
interface Reader {
  store: EventStore;
  position: () => number;
  attributes: Attributes;
}

const readers = new Set<Reader>();

/**
 * One gauge for every reader of this process, observed when the metrics are collected (each minute by default):
 * the log's last position, asked once per store, less the reader's.
 */
const lagGauge = instruments((meter) => {
  const gauge = meter.createObservableGauge('oc.eventstore.subscription.lag', {
    description:
      "How far a reader of the log (a service's projections, an outbox relay, an embedded durable consumer) is behind it: the log's last position less the last one the reader handled. A position is an event in SQLite, a commit position (which grows with each event's size) in KurrentDB.",
    unit: '{position}',
  });
  gauge.addCallback(async (result) => {
    const heads = new Map<EventStore, Promise<number | undefined>>();
    await Promise.all(
      [...readers].map(async (reader) => {
        let head = heads.get(reader.store);
        // A log that cannot be reached now is left out of this collection rather than failing the others.
        if (!head) heads.set(reader.store, (head = reader.store.headPosition().catch(() => undefined)));
        const last = await head;
        // -1 is a reader that has handled nothing yet: SQLite's positions start at 1, KurrentDB's further on.
        if (last !== undefined) result.observe(Math.max(0, last - Math.max(0, reader.position())), reader.attributes);
      }),
    );
  });
  return gauge;
});

/**
 * Reports how far `name` (`projection.<service>`, `outbox-relay.<service>`, a consumer's name) is behind `store`,
 * `position` being the last position it has handled, until the returned function is called. Nothing while
 * telemetry is off.
 */
export function observeSubscriptionLag(name: string, store: EventStore, position: () => number): () => void {
  if (!telemetryEnabled()) return () => {};
  lagGauge();
  const reader: Reader = { store, position, attributes: { 'oc.subscription.name': name } };
  readers.add(reader);
  return () => readers.delete(reader);
}
