/**
 * The one event-store port. Every backend (SQLite embedded, EventStoreDB in production) implements it
 * and passes the same contract suite (`test/contract.ts`).
 */

export interface EventMetadata {
  correlationId?: string;
  causationId?: string;
  traceparent?: string;
  [key: string]: unknown;
}

export interface NewEvent<Type extends string = string, Data = unknown> {
  /** Message id (a UUID); downstream de-duplication keys on it. */
  id?: string;
  type: Type;
  data: Data;
  metadata?: EventMetadata;
}

export interface StoredEvent<Type extends string = string, Data = unknown> {
  id: string;
  type: Type;
  data: Data;
  metadata: EventMetadata;
  streamName: string;
  /** 0-based position of the event inside its stream. */
  revision: number;
  /** Position in the global log: strictly increasing in append order across all streams. */
  position: number;
  /** Milliseconds since the epoch, from the store's injected clock. */
  created: number;
}

/**
 * `no_stream`: the stream must not exist yet (creates).
 * a number: the stream's current last revision must be exactly this (updates).
 * `any`: no check; only for streams that are written by one writer by construction.
 */
export type ExpectedRevision = 'no_stream' | 'any' | number;

export interface AppendResult {
  /** Revision of the last event appended; pass it as `expectedRevision` for the next append. */
  nextExpectedRevision: number;
  /** Global position of the last event appended; projections use it for read-your-writes. */
  position: number;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamName: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | 'no_stream',
  ) {
    super(`Wrong expected revision on ${streamName}: expected ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

export interface ReadStreamOptions {
  fromRevision?: number;
  maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: only events with a position greater than this. Omit to read from the start. */
  after?: number;
  maxCount: number;
}

/**
 * Receives the log in batches: each a run of consecutive events in position order, never empty. Events are
 * shared by every subscriber of the process, so a handler must not change them.
 */
export type BatchHandler = (events: readonly StoredEvent[]) => Promise<void> | void;

export interface Subscription {
  /** Stops delivery; resolves once no handler call is running. */
  stop(): Promise<void>;
}

export interface SubscribeOptions {
  /** Exclusive position to catch up from; omit to start at the beginning of the log. */
  after?: number;
  /** Largest batch handed to the handler at once (default 500). */
  maxBatchSize?: number;
  /** Called when the handler throws; delivery of later events stops, so nothing is skipped. */
  onError?: (error: unknown, events: readonly StoredEvent[]) => void;
}

export interface EventStore {
  appendToStream(
    streamName: string,
    events: NewEvent[],
    options: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult>;
  /** Events of one stream in revision order; an empty array when the stream does not exist. */
  readStream(streamName: string, options?: ReadStreamOptions): Promise<StoredEvent[]>;
  readAll(options: ReadAllOptions): Promise<StoredEvent[]>;
  /**
   * Catch-up then live subscription to the global log. Events reach the handler in batches, in position
   * order; the next batch waits for the previous handler's promise, and collects what arrived meanwhile.
   */
  subscribeToAll(handler: BatchHandler, options?: SubscribeOptions): Subscription;
  /**
   * Position of the last event in the global log, as committed by any writer (another process, another
   * replica); -1 while the log is empty. Every append answered before this is called is at or below it,
   * so a reader that waits for its read models to reach it reads everything written before it asked.
   * This process's live subscriptions are handed whatever that brings to light.
   */
  headPosition(): Promise<number>;
  /** Cheap reachability probe for readiness checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Durable positions of subscribers (outbox relay, durable consumers, persistent projections). */
export interface CheckpointStore {
  load(name: string): Promise<number | undefined>;
  store(name: string, position: number): Promise<void>;
}
