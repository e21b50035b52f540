import type { Clock } from '@oc/contracts';
import type { Scheduler } from '../application/ports';

interface Pending {
  atMs: number;
  task: () => Promise<void>;
}

/**
 * Compares due times with the injected clock on a short real-time tick, so the same code runs on the
 * system clock and, in tests, on a `ManualClock` that is moved by hand (no test waits for real time).
 */
export class ClockScheduler implements Scheduler {
  private readonly pending = new Map<string, Pending>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly timer: ReturnType<typeof setInterval>;
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly onError: (error: unknown, key: string) => void,
    tickMs = 25,
  ) {
    this.timer = setInterval(() => this.runDue(), tickMs);
    this.timer.unref();
  }

  schedule(key: string, atMs: number, task: () => Promise<void>): void {
    if (!this.closed) this.pending.set(key, { atMs, task });
  }

  cancel(key: string): void {
    this.pending.delete(key);
  }

  /** Starts every due task whose key is not already running; resolves when those have finished. */
  async runDue(): Promise<void> {
    const now = this.clock.now();
    const started: Promise<void>[] = [];
    for (const [key, { atMs, task }] of this.pending) {
      if (atMs > now || this.running.has(key)) continue;
      this.pending.delete(key);
      const run = task()
        .catch((error: unknown) => this.onError(error, key))
        .finally(() => this.running.delete(key));
      this.running.set(key, run);
      started.push(run);
    }
    await Promise.all(started);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.pending.clear();
    await Promise.all(this.running.values());
  }
}
