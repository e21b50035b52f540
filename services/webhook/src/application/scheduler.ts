import type { Clock } from '@oc/contracts';

/** Timers come in from outside, like the clock, so retry timing is tested without waiting. */
export interface Timers {
  /** Calls `callback` once after `ms`; the returned function cancels it. */
  after(ms: number, callback: () => void): () => void;
}

// setTimeout fires at once past 2^31-1 ms; a later wake-up simply re-arms.
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemTimers: Timers = {
  after(ms, callback) {
    const timer = setTimeout(callback, Math.min(Math.max(0, ms), MAX_TIMER_MS));
    return () => clearTimeout(timer);
  },
};

export interface SchedulerOptions {
  clock: Clock;
  timers: Timers;
  /** Attempts in flight across all endpoints. */
  maxConcurrent: number;
  /** Attempts in flight to one webhook, so one slow endpoint holds at most this many workers. */
  maxConcurrentPerEndpoint: number;
  /** Makes one attempt and schedules the next itself; a throw means "not recorded, try again later". */
  run(deliveryId: string): Promise<void>;
  /** When a run that threw is tried again. */
  retryAfterErrorMs: number;
  onError(error: unknown, deliveryId: string): void;
}

interface Task {
  deliveryId: string;
  webhookId: string;
}

/**
 * Keeps the due time of every pending delivery in memory (rebuilt from the event-sourced deliveries at
 * start), sleeps on one timer until the earliest (a delivery due already starts on the next turn of the
 * event loop, without a timer), and runs due attempts under two bounds: overall and per endpoint. A task
 * waiting for its endpoint's lane never blocks the tasks of other endpoints.
 */
export class DeliveryScheduler {
  private readonly waiting = new Map<string, Task & { at: number }>();
  private readonly ready: Task[] = [];
  private readonly queued = new Set<string>();
  private readonly perEndpoint = new Map<string, number>();
  private readonly inFlight = new Set<Promise<void>>();
  /** Deliveries whose attempt is being made now. */
  private readonly running = new Set<string>();
  private cancelTimer: (() => void) | undefined;
  private immediate: ReturnType<typeof setImmediate> | undefined;
  private stopped = false;

  constructor(private readonly options: SchedulerOptions) {}

  /** Attempt `deliveryId` at `at` (ms since the epoch); a later call for the same delivery replaces it. */
  schedule(deliveryId: string, webhookId: string, at: number): void {
    if (this.stopped) return;
    this.waiting.set(deliveryId, { deliveryId, webhookId, at });
    this.arm();
  }

  /** Whether an attempt of the delivery is being made now (it may already be on its way to the endpoint). */
  attempting(deliveryId: string): boolean {
    return this.running.has(deliveryId);
  }

  /** Deliveries waiting for their time or a free worker. */
  get pending(): number {
    return this.waiting.size + this.ready.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    if (this.immediate) clearImmediate(this.immediate);
    this.waiting.clear();
    this.ready.length = 0;
    await Promise.allSettled([...this.inFlight]);
  }

  private arm(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    let earliest = Infinity;
    for (const task of this.waiting.values()) if (!this.queued.has(task.deliveryId)) earliest = Math.min(earliest, task.at);
    if (earliest === Infinity) return;
    const wait = earliest - this.options.clock.now();
    // Due already (a new delivery's first attempt): on the next turn of the event loop, not through a timer.
    if (wait <= 0) return this.soon();
    this.cancelTimer = this.options.timers.after(wait, () => this.release());
  }

  private soon(): void {
    if (this.immediate || this.stopped) return;
    this.immediate = setImmediate(() => {
      this.immediate = undefined;
      if (!this.stopped) this.release();
    });
  }

  private release(): void {
    const now = this.options.clock.now();
    for (const task of [...this.waiting.values()].sort((a, b) => a.at - b.at)) {
      // One attempt of a delivery at a time: a due time set while it runs waits for it to finish.
      if (task.at > now || this.queued.has(task.deliveryId)) continue;
      this.waiting.delete(task.deliveryId);
      this.queued.add(task.deliveryId);
      this.ready.push({ deliveryId: task.deliveryId, webhookId: task.webhookId });
    }
    this.arm();
    this.pump();
  }

  private pump(): void {
    for (let i = 0; i < this.ready.length && this.inFlight.size < this.options.maxConcurrent; ) {
      const task = this.ready[i]!;
      const busy = this.perEndpoint.get(task.webhookId) ?? 0;
      if (busy >= this.options.maxConcurrentPerEndpoint) {
        i++;
        continue;
      }
      this.ready.splice(i, 1);
      this.perEndpoint.set(task.webhookId, busy + 1);
      this.running.add(task.deliveryId);
      const running: Promise<void> = this.options
        .run(task.deliveryId)
        .catch((error: unknown) => {
          this.options.onError(error, task.deliveryId);
          this.schedule(task.deliveryId, task.webhookId, this.options.clock.now() + this.options.retryAfterErrorMs);
        })
        .finally(() => {
          this.inFlight.delete(running);
          this.running.delete(task.deliveryId);
          this.queued.delete(task.deliveryId);
          const left = (this.perEndpoint.get(task.webhookId) ?? 1) - 1;
          if (left === 0) this.perEndpoint.delete(task.webhookId);
          else this.perEndpoint.set(task.webhookId, left);
          if (!this.stopped) this.release();
        });
      this.inFlight.add(running);
    }
  }
}
