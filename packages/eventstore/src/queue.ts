import type { StoredEvent } from './port';

/**
 * Events waiting for one subscriber's handler. `take` hands over everything queued (up to a batch size)
 * in one go, so whatever arrived while the handler was busy becomes its next batch.
 */
export class EventQueue {
  #items: StoredEvent[] = [];
  #wake: (() => void) | undefined;

  get length(): number {
    return this.#items.length;
  }

  push(events: readonly StoredEvent[]): void {
    // A loop, not push(...events): spreading a very large array overflows the call stack.
    for (const event of events) this.#items.push(event);
    this.#wake?.();
  }

  clear(): void {
    this.#items = [];
  }

  /** Up to `max` events; waits while the queue is empty. Resolves empty only when `interrupt()` is called. */
  async take(max: number): Promise<StoredEvent[]> {
    if (this.#items.length === 0) {
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
    if (this.#items.length <= max) {
      const all = this.#items;
      this.#items = [];
      return all;
    }
    return this.#items.splice(0, max);
  }

  /** Ends a `take` that is waiting, which then resolves with whatever is queued (possibly nothing). */
  interrupt(): void {
    this.#wake?.();
  }
}

export const DEFAULT_MAX_BATCH = 500;
