import type { Reply } from '@oc/contracts';
import type { StoredEvent, Subscription } from '@oc/eventstore';

export interface RequestOptions {
  /** Default 10 s; a request that gets no answer in time fails with 503 service_unavailable. */
  timeoutMs?: number;
  /** Propagated to the handler (e.g. `traceparent`, lower case). */
  headers?: Record<string, string>;
}

/**
 * How a caller (the gateway, or one service calling another) reaches a service: request/reply on a
 * subject, plus fire-and-forget broadcasts that every subscriber receives (no queue group).
 * Implemented over NATS (Nest's ClientNats framing) and in-process with the same semantics.
 */
export interface ServiceClient {
  request<T>(subject: string, payload: unknown, options?: RequestOptions): Promise<Reply<T>>;
  broadcast(subject: string, payload: unknown): Promise<void>;
  onBroadcast(subject: string, handler: (payload: unknown) => void): Promise<Subscription>;
  /** Reachability probe for /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface EventFilter {
  /** Only events of these types (e.g. `['VideoCompleted']`). */
  types: readonly string[];
  /** Only events of this service's streams (the `<service>` in `events.<service>.<type>`). */
  service: string;
}

/**
 * Durable, at-least-once delivery of stored domain events to a named consumer. Over NATS a JetStream
 * durable consumer fed by the outbox relay; embedded, a checkpointed subscription to the event store.
 * The handler must be idempotent (de-duplicate on `event.id`): redelivery after a crash is expected.
 */
export interface DurableEventBus {
  consume(
    consumerName: string,
    filter: EventFilter,
    handler: (event: StoredEvent) => Promise<void>,
  ): Promise<Subscription>;
}
