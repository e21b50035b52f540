import type { Clock } from '@oc/contracts';
import type { Scheduler } from '../application/ports';

interface Pending {
  atMs: number;
  task: () => Promise<void>;
  /** Tells this scheduling apart from earlier ones of the same key still in the queue. */
  seq: number;
}

interface Entry {
  atMs: number;
  key: string;
  seq: number;
}

/** A binary min-heap of due times; entries replaced or cancelled are skipped when they surface. */
class DueQueue {
  private readonly heap: Entry[] = [];

  get size() {
    return this.heap.length;
  }

  peek(): Entry | undefined {
    return this.heap[0];
  }

  push(entry: Entry): void {
    const heap = this.heap;
    heap.push(entry);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.atMs <= heap[i]!.atMs) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  pop(): Entry | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let min = i;
        if (l < heap.length && heap[l]!.atMs < heap[min]!.atMs) min = l;
        if (r < heap.length && heap[r]!.atMs < heap[min]!.atMs) min = r;
        if (min === i) break;
        [heap[min], heap[i]] = [heap[i]!, heap[min]!];
        i = min;
      }
    }
    return top;
  }

  clear(): void {
    this.heap.length = 0;
  }
}

/**
 * Runs each task once its due time by the injected clock has come, one at a time per key. A task due
 * when it is scheduled (or when the running task of its key ends) starts at once, on the next turn of
 * the event loop; later ones are found by a short real-time tick that compares due times with the
 * clock, so the same code runs on the system clock and, in tests, on a `ManualClock` that is moved by
 * hand (no test waits for real time). Due times are kept in a heap: a tick with nothing due costs nothing
 * however many tasks wait (completed videos wait 45 minutes for persistence).
 */
export class ClockScheduler implements Scheduler {
  private readonly pending = new Map<string, Pending>();
  private readonly queue = new DueQueue();
  private readonly running = new Map<string, Promise<void>>();
  private readonly timer: ReturnType<typeof setInterval>;
  private immediate: ReturnType<typeof setImmediate> | undefined;
  private seq = 0;
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly onError: (error: unknown, key: string) => void,
    tickMs = 25,
  ) {
    this.timer = setInterval(() => this.startDue(), tickMs);
    this.timer.unref();
  }

  schedule(key: string, atMs: number, task: () => Promise<void>): void {
    if (this.closed) return;
    const seq = ++this.seq;
    this.pending.set(key, { atMs, task, seq });
    this.queue.push({ atMs, key, seq });
    if (atMs <= this.clock.now() && !this.running.has(key)) this.soon();
  }

  cancel(key: string): void {
    this.pending.delete(key);
  }

  /**
   * Starts every due task whose key is not already running; resolves when every task running then
   * (those it started and those started before) has finished.
   */
  async runDue(): Promise<void> {
    this.startDue();
    await Promise.all(this.running.values());
  }

  private startDue(): void {
    const now = this.clock.now();
    const busy: Entry[] = [];
    for (let head = this.queue.peek(); head && head.atMs <= now; head = this.queue.peek()) {
      const entry = this.queue.pop()!;
      const pending = this.pending.get(entry.key);
      if (!pending || pending.seq !== entry.seq) continue;
      // One task per key at a time: this one waits until the running one ends.
      if (this.running.has(entry.key)) {
        busy.push(entry);
        continue;
      }
      this.pending.delete(entry.key);
      this.start(entry.key, pending.task);
    }
    for (const entry of busy) this.queue.push(entry);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.pending.clear();
    this.queue.clear();
    await Promise.all(this.running.values());
  }

  private start(key: string, task: () => Promise<void>): void {
    const run = task()
      .catch((error: unknown) => this.onError(error, key))
      .finally(() => {
        this.running.delete(key);
        const next = this.pending.get(key);
        if (next && next.atMs <= this.clock.now() && !this.closed) this.soon();
      });
    this.running.set(key, run);
  }

  /** A run of what is due on the next turn of the event loop (one, however many ask). */
  private soon(): void {
    if (this.immediate || this.closed) return;
    this.immediate = setImmediate(() => {
      this.immediate = undefined;
      this.startDue();
    });
  }
}
