import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckpointStore, EventStore, StoredEvent, Subscription } from '@oc/eventstore';

/** Waits before retry number `attempt` (0-based); must resolve early once `signal` aborts. */
export type RetryDelay = (attempt: number, signal: AbortSignal) => Promise<void>;

export const exponentialBackoff =
  ({ initialMs = 100, maxMs = 30_000 } = {}): RetryDelay =>
  (attempt, signal) =>
    sleep(Math.min(maxMs, initialMs * 2 ** attempt), undefined, { signal }).catch(() => undefined);

export type EventErrorHandler = (error: unknown, event: StoredEvent) => void;

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

export interface CheckpointedSubscriptionOptions {
  eventStore: EventStore;
  checkpoints: CheckpointStore;
  name: string;
  handle: (event: StoredEvent) => Promise<void>;
  retryDelay: RetryDelay;
  onError: EventErrorHandler;
}

/**
 * `subscribeToAll` from the stored checkpoint. A failing `handle` is retried on the same event
 * (never skipped), and the checkpoint moves only once it succeeded: a crash in between replays the
 * event, so `handle` must be idempotent.
 */
export async function subscribeCheckpointed(options: CheckpointedSubscriptionOptions): Promise<Subscription> {
  const { eventStore, checkpoints, name, handle, retryDelay, onError } = options;
  const stopping = new AbortController();
  const retry = (operation: () => Promise<unknown>, event: StoredEvent) =>
    retryUntilDone(operation, retryDelay, stopping.signal, (error) => onError(error, event));

  const subscription = eventStore.subscribeToAll(
    async (event) => {
      if (!(await retry(() => handle(event), event))) return;
      await retry(() => checkpoints.store(name, event.position), event);
    },
    { after: await checkpoints.load(name), onError },
  );
  return {
    stop: async () => {
      stopping.abort();
      await subscription.stop();
    },
  };
}
