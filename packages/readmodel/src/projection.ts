import type { EventStore, StoredEvent, Subscription } from '@oc/eventstore';
import type { Collection, Document, ReadModelStore } from './port';

export interface ProjectionContext {
  collection<T extends Document>(name: string): Collection<T>;
}

export interface Projection {
  name: string;
  canHandle: readonly string[];
  handle(event: StoredEvent, ctx: ProjectionContext): Promise<void>;
}

/** Emmett-style single-document projection: evolve(document | null, event) → document | null (null deletes). */
export function documentProjection<T extends Document>(p: {
  name: string;
  collection: string;
  canHandle: readonly string[];
  /** `null` when this event concerns no document of the collection. */
  documentId(event: StoredEvent): string | null;
  evolve(doc: T | null, event: StoredEvent): T | null;
}): Projection {
  return {
    name: p.name,
    canHandle: p.canHandle,
    async handle(event, ctx) {
      const id = p.documentId(event);
      if (id === null) return;
      const collection = ctx.collection<T>(p.collection);
      const next = p.evolve(await collection.findOne({ _id: id }), event);
      if (next === null) return collection.deleteOne(id);
      // A different _id would silently leave the old document behind and create a second one.
      if (next._id !== id) throw new Error(`${p.name}: evolve returned _id ${next._id} for document ${id}`);
      await collection.upsert(next);
    },
  };
}

const CATCH_UP_PAGE_SIZE = 500;

interface Waiter {
  position: number;
  resolve(): void;
  reject(error: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * Feeds the global log to projections through one subscription, each projection skipping what its own
 * checkpoint says it already applied. A checkpoint is stored after every event a projection handles,
 * after the read-model write, so a crash re-applies at most that one event and never skips one.
 *
 * A projection error stops the runner: during start() it rejects start(), afterwards it goes to
 * onError. Either way pending and later waitFor() calls reject with it.
 */
export class ProjectionRunner {
  readonly #checkpoints = new Map<string, number | undefined>();
  readonly #waiters = new Set<Waiter>();
  readonly #onError: (error: unknown) => void;
  #position = -1;
  #halted: { error: unknown } | undefined;
  #stopped = false;
  #starting: Promise<void> | undefined;
  #subscription: Subscription | undefined;

  constructor(
    private readonly eventStore: EventStore,
    private readonly readModels: ReadModelStore,
    private readonly projections: Projection[],
    options: { onError?: (error: unknown) => void } = {},
  ) {
    // A runner that stops without a word leaves read models silently stale; say so at least on stderr.
    this.#onError = options.onError ?? ((error) => console.error('Projection runner stopped', error));
  }

  /** Last processed global position; -1 before the first event. */
  get position(): number {
    return this.#position;
  }

  /** Resolves once every projection has caught up with the log as it was when start() was called. */
  start(): Promise<void> {
    this.#starting ??= this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    for (const { name } of this.projections) {
      this.#checkpoints.set(name, await this.readModels.loadCheckpoint(name));
    }
    const checkpoints = [...this.#checkpoints.values()];
    if (checkpoints.length > 0 && checkpoints.every((c) => c !== undefined)) {
      this.#position = Math.min(...checkpoints);
    }
    try {
      // Reading pages until a short one is how start() knows the catch-up reached the log's end.
      for (let page = await this.#nextPage(); ; page = await this.#nextPage()) {
        for (const event of page) {
          if (this.#stopped) return;
          await this.#apply(event);
        }
        if (page.length < CATCH_UP_PAGE_SIZE) break;
      }
    } catch (error) {
      this.#halt(error);
      throw error;
    }
    if (this.#stopped) return;
    this.#subscription = this.eventStore.subscribeToAll((event) => this.#apply(event), {
      after: this.#after(),
      onError: (error) => {
        this.#halt(error);
        this.#onError(error);
      },
    });
  }

  /** Read-your-writes: resolves once every projection has processed `position`. */
  waitFor(position: number, timeoutMs = 5_000): Promise<void> {
    if (position <= this.#position) return Promise.resolve();
    if (this.#halted) return Promise.reject(this.#halted.error);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        position,
        resolve,
        reject,
        timer: setTimeout(
          () =>
            this.#settle(waiter, {
              error: new Error(`Projections did not reach position ${position} within ${timeoutMs} ms`),
            }),
          timeoutMs,
        ),
      };
      this.#waiters.add(waiter);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    // A catch-up failure has already reached start()'s caller.
    await this.#starting?.catch(() => undefined);
    await this.#subscription?.stop();
    this.#halt(new Error('Projection runner stopped'));
  }

  #after(): number | undefined {
    return this.#position < 0 ? undefined : this.#position;
  }

  #nextPage(): Promise<StoredEvent[]> {
    return this.eventStore.readAll({ after: this.#after(), maxCount: CATCH_UP_PAGE_SIZE });
  }

  async #apply(event: StoredEvent): Promise<void> {
    for (const projection of this.projections) {
      const checkpoint = this.#checkpoints.get(projection.name);
      if (!projection.canHandle.includes(event.type)) continue;
      if (checkpoint !== undefined && event.position <= checkpoint) continue;
      await projection.handle(event, this.readModels);
      await this.readModels.storeCheckpoint(projection.name, event.position);
      this.#checkpoints.set(projection.name, event.position);
    }
    this.#position = event.position;
    for (const waiter of this.#waiters) if (waiter.position <= event.position) this.#settle(waiter);
  }

  #halt(error: unknown): void {
    this.#halted ??= { error };
    for (const waiter of this.#waiters) this.#settle(waiter, this.#halted);
  }

  #settle(waiter: Waiter, failure?: { error: unknown }): void {
    clearTimeout(waiter.timer);
    this.#waiters.delete(waiter);
    if (failure) waiter.reject(failure.error);
    else waiter.resolve();
  }
}
