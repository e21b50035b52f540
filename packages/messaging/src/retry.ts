import { setTimeout as sleep } from 'node:timers/promises';
import { type CheckpointStore, type EventStore, observeSubscriptionLag, type StoredEvent, type Subscription } from '@oc/eventstore';

/** Waits before retry number `attempt` (0-based); must resolve early once `signal` aborts. */
export type RetryDelay = (attempt: number, signal: AbortSignal) => Promise<void>;

export const exponentialBackoff =
  ({ initialMs = 100, maxMs = 30_000 } = {}): RetryDelay =>
  (attempt, signal) =>
    sleep(Math.min(maxMs, initialMs * 2 ** attempt), undefined, { signal }).catch(() => undefined);

export type EventErrorHandler = (error: unknown, events: readonly StoredEvent[]) => void;

/** Runs `operation` until it succeeds; `false` when `signal` aborted first. */
async function retryUntilDone(
  operation: () => Promise<unknown>,
  delay: RetryDelay,
  signal: AbortSignal,
  onError: (error: unknown) => void,
): Promise<boolean> {
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      await operation();
      return true;
    } catch (error) {
      if (signal.aborted) return false;
      onError(error);
      await delay(attempt, signal);
    }
  }
  return false;
}

/** `event evt_1 (VideoCompleted)`, or the first and last of a longer batch, for logs. */
export function describe(events: readonly StoredEvent[]): string {
  const name = (e: StoredEvent) => `${e.id} (${e.type})`;
  return events.length === 1 ? `event ${name(events[0]!)}` : `events ${name(events[0]!)} … ${name(events.at(-1)!)}`;
}

/** A checkpoint moves at least this often even while no event concerns the subscriber. */
const CHECKPOINT_EVERY_EVENTS = 1_000;

export interface CheckpointedSubscriptionOptions {
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  name: string;
  /** Handles a batch; resolves whether any event in it concerned this subscriber. */
  handle: (events: readonly StoredEvent[]) => Promise<boolean>;
  retryDelay: RetryDelay;
  onError: EventErrorHandler;
}

/**
 * `subscribeToAll` from the stored checkpoint. A failing `handle` is retried on the same batch (nothing is
 * skipped), and the checkpoint moves only once it succeeded: a crash in between replays the batch, so
 * `handle` must be idempotent. Batches that concerned nobody move the checkpoint only now and then.
 */
export async function subscribeCheckpointed(options: CheckpointedSubscriptionOptions): Promise<Subscription> {
  const { eventStore, checkpoints, name, handle, retryDelay, onError } = options;
  const stopping = new AbortController();
  const retry = (operation: () => Promise<unknown>, events: readonly StoredEvent[]) =>
    retryUntilDone(operation, retryDelay, stopping.signal, (error) => onError(error, events));
  const start = await checkpoints.load(name);
  let stored = start ?? 0;
  // What was handled, not what the checkpoint says: the checkpoint moves only now and then.
  let handled = stored;
  const unobserve = observeSubscriptionLag(name, eventStore, () => handled);

  const subscription = eventStore.subscribeToAll(
    async (events) => {
      let concerned = false;
      if (!(await retry(async () => (concerned = await handle(events)), events))) return;
      const last = events.at(-1)!.position;
      handled = last;
      if (!concerned && last - stored < CHECKPOINT_EVERY_EVENTS) return;
      if (await retry(() => checkpoints.store(name, last), events)) stored = last;
    },
    { ...(start !== undefined ? { after: start } : {}), onError },
  );
  return {
    stop: async () => {
      unobserve();
      stopping.abort();
      await subscription.stop();
    },
  };
}
