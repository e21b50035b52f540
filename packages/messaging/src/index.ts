export * from './port';
export { headersOf, type MessageContext } from './wire';
export { natsServerStrategy, NatsServiceClient, type NatsConnectOptions } from './nats';
export { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from './in-process';
export { serveThreadClient, ThreadServiceClient } from './thread';
export { exponentialBackoff, type EventErrorHandler, type RetryDelay } from './retry';
export { ensureEventsStream, startOutboxRelay, type OutboxRelayOptions } from './outbox-relay';
export { EventStoreEventBus, type EventStoreEventBusOptions } from './eventstore-bus';
export { JetStreamEventBus, type JetStreamEventBusOptions } from './jetstream-bus';
