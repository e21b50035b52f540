import type { EventStore } from '@oc/eventstore';
import type { ReadModelStore } from './port';
import { ProjectionRunner, type Projector, type ProjectorFactory, type ProjectionSet } from './projection';

/**
 * Runs `start`'s work only while this replica holds the service's projector lease (`runLeased` in a service
 * process), stopping it when the lease is lost; `stop` ends the work and gives the lease up.
 */
export type ProjectorLease = (start: () => Promise<{ stop(): Promise<void> }>) => { stop(): Promise<void> };

/** How a query waiting on one replica reaches the replica that projects (over NATS between processes). */
export interface ProjectionWishes {
  /** A query here waits until the read models show `position`. */
  tell(position: number): void;
  /** The projecting replica hears each position a query waits for, until `close`. */
  hear(listener: (position: number) => void): { close(): void };
}

export interface SharedProjectionOptions {
  lease: ProjectorLease;
  wishes: ProjectionWishes;
  /** The shared store opened for writing, for as long as this replica projects; `close` when it stops. */
  openWriter(): { store: ReadModelStore; close(): Promise<void> };
  /** How often a waiting query reads the shared checkpoints (default 2 ms: one indexed row in SQLite). */
  pollMs?: number;
  /** How long start() waits for the read models to show the log as it stood (default 60 s: a rebuild from scratch). */
  startTimeoutMs?: number;
}

interface Waiter {
  position: number;
  resolve(): void;
  reject(error: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * A batch nobody waits for is committed after this long: a query that needs it says so (`wishes`), which
 * commits it at once, so batches may gather.
 */
const UNWAITED_COMMIT_DELAY_MS = 100;

/**
 * Each service's read models projected once for all its replicas, into one store they all read (one SQLite
 * file in WAL mode on one machine, the service's MongoDB database in production): the replica holding the
 * lease runs the projections; a query on any replica waits until the store's checkpoints show the position
 * it needs, polling them and telling the projecting replica, which then looks at the log and commits at once.
 * The next holder continues from the stored checkpoints; a batch the previous one committed late changes
 * nothing it wrote since, the store writing a document only for an event newer than the one it shows.
 */
export function sharedProjection(options: SharedProjectionOptions): ProjectorFactory {
  return ({ service, set, eventStore, readModels, onError }) => new SharedProjector(service, set, eventStore, readModels, options, onError);
}

class SharedProjector implements Projector {
  readonly #waiters = new Set<Waiter>();
  /** What the shared checkpoints showed at the last look. */
  #shown = -1;
  /** The highest position told to the projecting replica: a wish for less is already on its way. */
  #told = -1;
  #poll: ReturnType<typeof setTimeout> | undefined;
  /** The runner while this replica projects. */
  #runner: ProjectionRunner | undefined;
  #lease: { stop(): Promise<void> } | undefined;
  #halted: Error | undefined;

  constructor(
    private readonly service: string,
    private readonly set: ProjectionSet,
    private readonly eventStore: EventStore,
    private readonly readModels: ReadModelStore,
    private readonly options: SharedProjectionOptions,
    private readonly onError: (error: unknown) => void,
  ) {}

  get position(): number {
    return Math.max(this.#shown, this.#runner?.position ?? -1);
  }

  /** Resolves once the shared store shows the log as it stood, whichever replica projects it. */
  async start(): Promise<void> {
    // This replica's queries name the collections: its connection must know them.
    await this.readModels.declare(this.set.collections);
    this.#lease = this.options.lease(() => this.#project());
    const head = await this.eventStore.headPosition();
    if (head >= 0) await this.waitFor(head, this.options.startTimeoutMs ?? 60_000);
  }

  waitFor(position: number, timeoutMs = 5_000): Promise<void> {
    if (position <= this.#shown) return Promise.resolve();
    if (this.#halted) return Promise.reject(this.#halted);
    const runner = this.#runner;
    if (!runner) return this.#follow(position, timeoutMs);
    // This replica projects: its runner knows when the store shows the position; should it lose the lease
    // meanwhile, the checkpoints tell.
    return runner.waitFor(position, timeoutMs).catch((error: unknown) => {
      if (this.#runner === runner) throw error;
      return this.#follow(position, timeoutMs);
    });
  }

  async stop(): Promise<void> {
    this.#halted ??= new Error('Projection runner stopped');
    await this.#lease?.stop();
    clearTimeout(this.#poll);
    for (const waiter of this.#waiters) this.#settle(waiter, this.#halted);
  }

  async #project(): Promise<{ stop(): Promise<void> }> {
    const writer = this.options.openWriter();
    const runner = new ProjectionRunner(this.eventStore, writer.store, this.set.projections, {
      collections: this.set.collections,
      onError: this.onError,
      commitDelayMs: UNWAITED_COMMIT_DELAY_MS,
      sharedCheckpoints: true,
      // Reported by the replica that projects only: the others' view of the checkpoints is as old as their last query.
      name: `projection.${this.service}`,
    });
    // Another process appended what the query waits for: the log is looked at now, not at its next poll.
    const wishes = this.options.wishes.hear((position) => {
      void this.eventStore
        .headPosition()
        .then(() => runner.waitFor(position))
        .catch(() => undefined);
    });
    const stop = async () => {
      if (this.#runner === runner) this.#runner = undefined;
      wishes.close();
      await runner.stop();
      await writer.close();
    };
    this.#runner = runner;
    try {
      await runner.start();
    } catch (error) {
      // Not projecting: the lease's next look starts again from the checkpoints.
      await stop();
      throw error;
    }
    return { stop };
  }

  #follow(position: number, timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        position,
        resolve,
        reject,
        timer: setTimeout(
          () => this.#settle(waiter, new Error(`Projections did not reach position ${position} within ${timeoutMs} ms`)),
          timeoutMs,
        ),
      };
      this.#waiters.add(waiter);
      if (position > this.#told) {
        this.#told = position;
        this.options.wishes.tell(position);
      }
      // The first look at once: the projecting replica may have committed since the last.
      this.#poll ??= setTimeout(() => void this.#look(), 0);
    });
  }

  async #look(): Promise<void> {
    try {
      this.#shown = Math.max(this.#shown, await this.#stored());
    } catch (error) {
      this.onError(error);
    }
    this.#poll = undefined;
    for (const waiter of this.#waiters) if (waiter.position <= this.#shown) this.#settle(waiter);
    if (this.#waiters.size > 0) this.#poll = setTimeout(() => void this.#look(), this.options.pollMs ?? 2);
  }

  /** The position every projection's stored checkpoint has reached; -1 while one has none. */
  async #stored(): Promise<number> {
    let shown = Number.MAX_SAFE_INTEGER;
    for (const { name } of this.set.projections) {
      const checkpoint = await this.readModels.loadCheckpoint(name);
      if (checkpoint === undefined) return -1;
      shown = Math.min(shown, checkpoint);
    }
    return shown;
  }

  #settle(waiter: Waiter, error?: unknown): void {
    clearTimeout(waiter.timer);
    this.#waiters.delete(waiter);
    if (error) waiter.reject(error);
    else waiter.resolve();
  }
}
