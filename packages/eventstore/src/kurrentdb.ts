import {
  ANY,
  BACKWARDS,
  END,
  KurrentDBClient,
  NO_STREAM,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type AppendStreamState,
  type JSONType,
  type ReadPosition,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import { uuidV7 } from '@oc/contracts';
import {
  WrongExpectedRevisionError,
  type BatchHandler,
  type AppendResult,
  type CheckpointStore,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
} from './port';
import { DEFAULT_MAX_BATCH, EventQueue } from './queue';

/** Streams of `KurrentCheckpointStore`; hidden from readAll and subscribeToAll. */
const CHECKPOINT_PREFIX = 'checkpoint-';
const RESUBSCRIBE_DELAY_MS = 1_000;

const streamState = (expected: ExpectedRevision): AppendStreamState =>
  expected === 'no_stream' ? NO_STREAM : expected === 'any' ? ANY : BigInt(expected);

// The port's position is the commit position; events appended over gRPC have equal commit and prepare positions.
const fromPosition = (after: number | undefined): ReadPosition =>
  after === undefined ? START : { commit: BigInt(after), prepare: BigInt(after) };

function toStored({ event, commitPosition }: ResolvedEvent | AllStreamResolvedEvent): StoredEvent | undefined {
  if (!event?.isJson) return undefined;
  return {
    id: event.id,
    type: event.type,
    data: event.data,
    metadata: (event.metadata ?? {}) as EventMetadata,
    streamName: event.streamId,
    revision: Number(event.revision),
    // Stream reads on servers before 22.6 carry no position.
    position: Number(event.position?.commit ?? commitPosition ?? -1n),
    created: event.created.getTime(),
  };
}

const isApplicationEvent = (event: StoredEvent) =>
  !event.type.startsWith('$') && !event.streamName.startsWith('$') && !event.streamName.startsWith(CHECKPOINT_PREFIX);

export class KurrentEventStore implements EventStore {
  private readonly subscriptions = new Set<Subscription>();

  constructor(readonly client: KurrentDBClient) {}

  async appendToStream(
    streamName: string,
    events: NewEvent[],
    options: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult> {
    if (events.length === 0) throw new RangeError('appendToStream needs at least one event');
    try {
      const result = await this.client.appendToStream(
        streamName,
        events.map((e) =>
          jsonEvent({ id: e.id ?? uuidV7(), type: e.type, data: (e.data ?? null) as JSONType, metadata: e.metadata ?? {} }),
        ),
        // Always explicit: the client's default is ANY, which would switch optimistic concurrency off.
        { streamState: streamState(options.expectedRevision) },
      );
      // An idempotent repeat (same event ids) succeeds without a position; the stream's head is a safe stand-in.
      const position = result.position ? Number(result.position.commit) : await this.streamHeadPosition(streamName);
      return { nextExpectedRevision: Number(result.nextExpectedRevision), position };
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      const actual = error.actualState === NO_STREAM ? 'no_stream' : Number(error.actualState);
      throw new WrongExpectedRevisionError(streamName, options.expectedRevision, actual);
    }
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<StoredEvent[]> {
    const events: StoredEvent[] = [];
    try {
      const reading = this.client.readStream(streamName, {
        fromRevision: BigInt(options.fromRevision ?? 0),
        maxCount: options.maxCount ?? Number.MAX_SAFE_INTEGER,
      });
      for await (const resolved of reading) {
        const event = toStored(resolved);
        if (event) events.push(event);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return events;
  }

  async readAll({ after, maxCount }: ReadAllOptions): Promise<StoredEvent[]> {
    const events: StoredEvent[] = [];
    if (maxCount <= 0) return events;
    // No server-side maxCount: checkpoint events are filtered here and must not use up the page.
    const reading = this.client.readAll({ fromPosition: fromPosition(after), filter: excludeSystemEvents() });
    for await (const resolved of reading) {
      const event = toStored(resolved);
      // The server reads from a position inclusively; the port's `after` is exclusive.
      if (!event || !isApplicationEvent(event) || (after !== undefined && event.position <= after)) continue;
      events.push(event);
      if (events.length === maxCount) break;
    }
    return events;
  }

  subscribeToAll(handler: BatchHandler, options: SubscribeOptions = {}): Subscription {
    const maxBatch = options.maxBatchSize ?? DEFAULT_MAX_BATCH;
    const queue = new EventQueue();
    /** Last position taken from the server: a resubscription continues after it. */
    let received = options.after;
    let stopped = false;
    let current: AllStreamSubscription | undefined;
    let wake = () => {};
    let drained = () => {};

    // Reads from the server into the queue, pausing while the handler is a full batch behind.
    const pump = (async () => {
      while (!stopped) {
        current = this.client.subscribeToAll({ fromPosition: fromPosition(received), filter: excludeSystemEvents() });
        try {
          for await (const resolved of current) {
            const event = toStored(resolved);
            if (!event || !isApplicationEvent(event) || (received !== undefined && event.position <= received)) continue;
            if (stopped) return;
            queue.push([event]);
            received = event.position;
            if (queue.length >= maxBatch) await new Promise<void>((resolve) => (drained = resolve));
          }
        } catch {
          // A dropped connection: resubscribe below from the last event received, so nothing is skipped.
        } finally {
          await current.unsubscribe();
        }
        if (!stopped) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, RESUBSCRIBE_DELAY_MS);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
      }
    })();

    const delivery = (async () => {
      while (!stopped) {
        const batch = await queue.take(maxBatch);
        drained();
        if (stopped) return;
        if (batch.length === 0) continue;
        try {
          await handler(batch);
        } catch (error) {
          options.onError?.(error, batch);
          stopped = true;
          wake();
          drained();
          current?.destroy();
          return;
        }
      }
    })();

    const done = Promise.all([pump, delivery]).finally(() => this.subscriptions.delete(subscription));
    const subscription: Subscription = {
      stop: async () => {
        stopped = true;
        wake();
        drained();
        queue.interrupt();
        // unsubscribe() only cancels the gRPC call; destroying the readable is what ends the for-await.
        current?.destroy();
        await done;
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async ping(): Promise<void> {
    const reading = this.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 });
    await reading.next();
    await reading.return?.(undefined);
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    await this.client.dispose();
  }

  async headPosition(): Promise<number> {
    // Backwards from the end: the first application event (checkpoints are events of their own streams).
    const reading = this.client.readAll({ direction: BACKWARDS, fromPosition: END, filter: excludeSystemEvents() });
    for await (const resolved of reading) {
      const event = toStored(resolved);
      if (event && isApplicationEvent(event)) return event.position;
    }
    return -1;
  }

  private async streamHeadPosition(streamName: string): Promise<number> {
    const reading = this.client.readStream(streamName, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
    for await (const resolved of reading) return toStored(resolved)?.position ?? -1;
    return -1;
  }
}

/** Each checkpoint is the last event of `checkpoint-<name>`; stream metadata keeps only that one. */
export class KurrentCheckpointStore implements CheckpointStore {
  constructor(private readonly client: KurrentDBClient) {}

  async load(name: string): Promise<number | undefined> {
    try {
      const reading = this.client.readStream(CHECKPOINT_PREFIX + name, {
        direction: BACKWARDS,
        fromRevision: END,
        maxCount: 1,
      });
      for await (const { event } of reading) return (event?.data as { position: number }).position;
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return undefined;
  }

  async store(name: string, position: number): Promise<void> {
    const streamName = CHECKPOINT_PREFIX + name;
    // One writer per checkpoint and the last write wins, so no revision check.
    const result = await this.client.appendToStream(streamName, jsonEvent({ type: 'Checkpoint', data: { position } }), {
      streamState: ANY,
    });
    if (result.nextExpectedRevision === 0n) await this.client.setStreamMetadata(streamName, { maxCount: 1 });
  }
}

export function openKurrentStores(connectionString: string) {
  const client = KurrentDBClient.connectionString(connectionString);
  const store = new KurrentEventStore(client);
  return { store, checkpoints: new KurrentCheckpointStore(client), close: () => store.close() };
}
