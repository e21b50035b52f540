import { type Attributes, instruments, telemetryEnabled } from '@oc/telemetry';

/** A durable consumer of this process: how to ask its server what it has not acknowledged yet. */
interface Consumer {
  pending: () => Promise<number>;
  attributes: Attributes;
}

const consumers = new Set<Consumer>();

/** Observed when the metrics are collected (each minute by default): one question to the server per consumer. */
const pendingGauge = instruments((meter) => {
  const gauge = meter.createObservableGauge('oc.messaging.consumer.pending', {
    description:
      'Messages of a JetStream durable consumer not acknowledged yet: not delivered (num_pending) plus delivered and awaiting their ack (num_ack_pending).',
    unit: '{message}',
  });
  gauge.addCallback(async (result) => {
    await Promise.all(
      [...consumers].map(async (consumer) => {
        // A server that cannot answer now is left out of this collection rather than failing the others.
        const pending = await consumer.pending().catch(() => undefined);
        if (pending !== undefined) result.observe(pending, consumer.attributes);
      }),
    );
  });
  return gauge;
});

/**
 * Reports `consumer`'s pending messages on `stream` until the returned function is called; nothing while telemetry
 * is off. Every replica sharing the consumer reports the same figure: read it by its maximum, not its sum.
 */
export function observeConsumerPending(
  stream: string,
  consumer: string,
  info: () => Promise<{ num_pending: number; num_ack_pending: number }>,
): () => void {
  if (!telemetryEnabled()) return () => {};
  pendingGauge();
  const observed: Consumer = {
    pending: async () => {
      const { num_pending, num_ack_pending } = await info();
      return num_pending + num_ack_pending;
    },
    attributes: { 'messaging.system': 'nats', 'messaging.destination.name': stream, 'messaging.consumer.group.name': consumer },
  };
  consumers.add(observed);
  return () => consumers.delete(observed);
}
