import { type EventStore, observeSubscriptionLag, type StoredEvent, type Subscription } from '@oc/eventstore';
import type { Collection, CollectionSpec, Document, DocumentWrite, ReadModelStore } from './port';

/**
 * A projection's view of one collection during a batch: what it reads includes what it wrote earlier in
 * the batch, and nothing reaches the store before the batch commits. `get` returns a fresh copy, so a
 * change counts only once it is `put`.
 */
export interface DocumentSession<T extends Document> {
  get(id: string): Promise<T | null>;
  put(document: T): Promise<void>;
  /**
   * `put` for a document this event is the first to write (its id made from the event's own), so nothing is
   * read first; a replay of the event writes the same document, which the store's conditional write keeps.
   */
  create(document: T): Promise<void>;
  delete(id: string): Promise<void>;
}

export interface ProjectionContext {
  collection<T extends Document>(name: string): DocumentSession<T>;
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
  /**
   * The event types that start a document (the first event of a stream with a fresh id): `evolve` makes it from
   * `null`, and it is `create`d without first reading whether the store holds it (a read that finds nothing,
   * once per new chat session otherwise). Only for documents never deleted: a created document deleted within
   * the same batch is not written at all, which a replay onto a store that already holds it must not meet.
   */
  startedBy?: readonly string[];
}): Projection {
  const starts = new Set(p.startedBy);
  return {
    name: p.name,
    canHandle: p.canHandle,
    async handle(event, ctx) {
      const id = p.documentId(event);
      if (id === null) return;
      const collection = ctx.collection<T>(p.collection);
      const started = starts.has(event.type);
      const next = p.evolve(started ? null : await collection.get(id), event);
      if (next === null) return started ? undefined : collection.delete(id);
      // A different _id would silently leave the old document behind and create a second one.
      if (next._id !== id) throw new Error(`${p.name}: evolve returned _id ${next._id} for document ${id}`);
      await (started ? collection.create(next) : collection.put(next));
    },
  };
}

interface Entry {
  json: string | null;
  /** Position of the last event applied to the document: as stored, then as written in this batch. */
  position: number;
  dirty: boolean;
  /** The store held the document when the batch began (a document `create`d here did not). */
  stored: boolean;
}

/**
 * The documents the runner last committed: a runner applies every event in order, so what it committed is
 * what the store holds (another runner on the same file writes the same), and a document events touch again
 * and again (an organization's balance) is not read back from the store each batch. Bounded by starting
 * over when full, which costs a few reads and nothing per document.
 */
class CommittedDocuments {
  readonly #documents = new Map<string, { json: string | null; position: number }>();
  constructor(private readonly max: number) {}

  get(key: string) {
    return this.#documents.get(key);
  }

  set(key: string, document: { json: string | null; position: number }) {
    if (this.#documents.size >= this.max) this.#documents.clear();
    this.#documents.set(key, document);
  }
}

const COMMITTED_DOCUMENTS_KEPT = 5_000;

/**
 * The documents one batch touches. A write for an event the stored document has already seen (a replay
 * after the checkpoint was lost) is dropped here, and again by the store's conditional write.
 */
class Batch implements ProjectionContext {
  readonly #entries = new Map<string, Entry>();
  position = -1;

  constructor(
    private readonly readModels: ReadModelStore,
    private readonly committed: CommittedDocuments,
  ) {}

  collection<T extends Document>(name: string): DocumentSession<T> {
    return {
      get: async (id) => {
        const { json } = await this.#entry(name, id);
        return json === null ? null : (JSON.parse(json) as T);
      },
      put: (document) => this.#write(name, document._id, JSON.stringify(document)),
      create: async (document) => {
        const key = `${name}\0${document._id}`;
        if (this.#entries.has(key)) return this.#write(name, document._id, JSON.stringify(document));
        this.#entries.set(key, { json: JSON.stringify(document), position: this.position, dirty: true, stored: false });
      },
      delete: (id) => this.#write(name, id, null),
    };
  }

  writes(): DocumentWrite[] {
    const writes: DocumentWrite[] = [];
    for (const [key, entry] of this.#entries) {
      // Made and deleted within the batch (an open reservation settled at once): nothing to write.
      if (!entry.dirty || (entry.json === null && !entry.stored)) continue;
      const split = key.indexOf('\0');
      writes.push({ collection: key.slice(0, split), id: key.slice(split + 1), position: entry.position, json: entry.json });
    }
    return writes;
  }

  /** The batch is in the store: its documents are what the store now holds. */
  committedAll(): void {
    for (const [key, entry] of this.#entries) if (entry.dirty) this.committed.set(key, { json: entry.json, position: entry.position });
  }

  async #write(collection: string, id: string, json: string | null): Promise<void> {
    const entry = await this.#entry(collection, id);
    if (entry.position >= this.position) return;
    entry.json = json;
    entry.position = this.position;
    entry.dirty = true;
  }

  async #entry(collection: string, id: string): Promise<Entry> {
    const key = `${collection}\0${id}`;
    let entry = this.#entries.get(key);
    if (!entry) {
      const stored = this.committed.get(key) ?? (await this.readModels.loadDocument(collection, id));
      entry = { json: stored?.json ?? null, position: stored?.position ?? -1, dirty: false, stored: (stored?.json ?? null) !== null };
      this.#entries.set(key, entry);
    }
    return entry;
  }
}

const CATCH_UP_PAGE_SIZE = 1_000;
/** Checkpoints move at least this often even when no projection wrote anything, so a restart re-reads little. */
const CHECKPOINT_EVERY_EVENTS = 1_000;
/**
 * How long applied events may wait to be committed when no query waits for them: writes do not wait for
 * read models (queries do, see `readYourWrites`), so commits can gather more, and a query that needs an
 * applied event commits it at once.
 */
const COMMIT_DELAY_MS = 10;
/** A batch this large is committed at once, whoever waits. */
const MAX_UNCOMMITTED_EVENTS = 5_000;

interface Waiter {
  position: number;
  resolve(): void;
  reject(error: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

export interface ProjectionRunnerOptions {
  /** The collections the projections write and the services query, created with their indexes at start. */
  collections: readonly CollectionSpec[];
  onError?: (error: unknown) => void;
  /**
   * How long applied events may wait to be committed when no query waits for them (default 10 ms); 0 commits
   * each batch as soon as it is applied (a projection thread, whose queries wait in another thread).
   */
  commitDelayMs?: number;
  /** Told each position the read models come to show. */
  onPosition?: (position: number) => void;
  /**
   * Other processes learn what the read models show from the stored checkpoints (`sharedProjection`): they
   * then move with every batch, one that wrote nothing included, rather than every `CHECKPOINT_EVERY_EVENTS`.
   */
  sharedCheckpoints?: boolean;
  /** `projection.<service>`: how far the read models are behind the log is reported under this name while it runs. */
  name?: string;
}

/**
 * What a service holds of its projections, wherever they run: when its read models show an event (for
 * read-your-writes), and their start (caught up with the log) and stop.
 */
export interface Projector {
  /** Last global position the read models show; -1 before the first event. */
  readonly position: number;
  start(): Promise<void>;
  /** Resolves once the read models show every event up to `position`; rejects after `timeoutMs`. */
  waitFor(position: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A service's projections, and what their read models must hold. */
export interface ProjectionSet {
  projections: Projection[];
  collections: readonly CollectionSpec[];
}

/**
 * Where a service's projections run. The default, `projectInThisThread`, feeds them in the service's own
 * thread; a projection thread (`projection-thread.ts`) runs them beside it.
 */
export type ProjectorFactory = (request: {
  /** The service, by the name its projection thread knows its projections under. */
  service: string;
  set: ProjectionSet;
  eventStore: EventStore;
  readModels: ReadModelStore;
  onError: (error: unknown) => void;
}) => Projector;

export const projectInThisThread: ProjectorFactory = ({ service, set, eventStore, readModels, onError }) =>
  new ProjectionRunner(eventStore, readModels, set.projections, { collections: set.collections, onError, name: `projection.${service}` });

/**
 * Feeds the global log to projections through one subscription. What they write gathers in a batch whose
 * document writes and every projection's checkpoint commit together, so a restart resumes from the
 * checkpoint and reads only the tail of the log; each projection skips what its own checkpoint says it
 * already applied. A batch is committed when a query waits for it, after `COMMIT_DELAY_MS`, or when large.
 *
 * A projection error stops the runner: during start() it rejects start(), afterwards it goes to
 * onError. Either way pending and later waitFor() calls reject with it.
 */
export class ProjectionRunner implements Projector {
  readonly #checkpoints = new Map<string, number | undefined>();
  readonly #handlers = new Map<string, Projection[]>();
  readonly #waiters = new Set<Waiter>();
  readonly #committed = new CommittedDocuments(COMMITTED_DOCUMENTS_KEPT);
  readonly #onError: (error: unknown) => void;
  /** Every event up to here is in the store (or changed nothing). */
  #position = -1;
  /** Every event up to here has been applied, to the store or to the uncommitted batch. */
  #applied = -1;
  /** Position of the last stored checkpoint. */
  #checkpointed = -1;
  #uncommitted: { batch: Batch; events: number } | undefined;
  #commitTimer: ReturnType<typeof setTimeout> | undefined;
  /** Applying and committing take turns, so a commit never takes a batch still being applied. */
  #turn: Promise<void> = Promise.resolve();
  #halted: { error: unknown } | undefined;
  #stopped = false;
  #starting: Promise<void> | undefined;
  #subscription: Subscription | undefined;
  #unobserve: (() => void) | undefined;

  constructor(
    private readonly eventStore: EventStore,
    private readonly readModels: ReadModelStore,
    private readonly projections: Projection[],
    private readonly options: ProjectionRunnerOptions,
  ) {
    // A runner that stops without a word leaves read models silently stale; say so at least on stderr.
    this.#onError = options.onError ?? ((error) => console.error('Projection runner stopped', error));
    for (const projection of projections) {
      for (const type of projection.canHandle) this.#handlers.set(type, [...(this.#handlers.get(type) ?? []), projection]);
    }
  }

  /** Last global position the read models show; -1 before the first event. */
  get position(): number {
    return this.#position;
  }

  /** Resolves once every projection has caught up with the log as it was when start() was called. */
  start(): Promise<void> {
    this.#starting ??= this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    if (this.options.name !== undefined) this.#unobserve = observeSubscriptionLag(this.options.name, this.eventStore, () => this.#position);
    await this.readModels.declare(this.options.collections);
    for (const { name } of this.projections) {
      this.#checkpoints.set(name, await this.readModels.loadCheckpoint(name));
    }
    const checkpoints = [...this.#checkpoints.values()];
    if (checkpoints.length > 0 && checkpoints.every((c) => c !== undefined)) {
      this.#position = this.#applied = this.#checkpointed = Math.min(...checkpoints);
    }
    try {
      // Reading pages until a short one is how start() knows the catch-up reached the log's end.
      for (;;) {
        const page = await this.eventStore.readAll({ after: this.#after(), maxCount: CATCH_UP_PAGE_SIZE });
        if (this.#stopped) return;
        if (page.length > 0) await this.#apply(page);
        if (page.length < CATCH_UP_PAGE_SIZE) break;
      }
      await this.#inTurn(() => this.#commit());
    } catch (error) {
      this.#halt(error);
      throw error;
    }
    if (this.#stopped) return;
    this.#subscription = this.eventStore.subscribeToAll((events) => this.#apply(events), {
      after: this.#after(),
      onError: (error) => this.#fail(error),
    });
  }

  /** Read-your-writes: resolves once the read models show every event up to `position`. */
  waitFor(position: number, timeoutMs = 5_000): Promise<void> {
    if (position <= this.#position) return Promise.resolve();
    if (this.#halted) return Promise.reject(this.#halted.error);
    const waiting = new Promise<void>((resolve, reject) => {
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
    if (position <= this.#applied) this.#commitSoon(0);
    return waiting;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unobserve?.();
    // A catch-up failure has already reached start()'s caller.
    await this.#starting?.catch(() => undefined);
    await this.#subscription?.stop();
    clearTimeout(this.#commitTimer);
    await this.#inTurn(() => this.#commit()).catch(() => undefined);
    this.#halt(new Error('Projection runner stopped'));
  }

  #after(): number | undefined {
    return this.#applied < 0 ? undefined : this.#applied;
  }

  #inTurn(work: () => Promise<void>): Promise<void> {
    const turn = this.#turn.then(work);
    this.#turn = turn.catch(() => undefined);
    return turn;
  }

  #apply(events: readonly StoredEvent[]): Promise<void> {
    return this.#inTurn(async () => {
      // A failed commit lost its batch: nothing may be applied on top of it.
      if (this.#halted) throw this.#halted.error;
      let uncommitted = this.#uncommitted;
      for (const event of events) {
        const handlers = this.#handlers.get(event.type);
        if (!handlers) continue;
        for (const projection of handlers) {
          const checkpoint = this.#checkpoints.get(projection.name);
          if (checkpoint !== undefined && event.position <= checkpoint) continue;
          uncommitted ??= this.#uncommitted = { batch: new Batch(this.readModels, this.#committed), events: 0 };
          uncommitted.batch.position = event.position;
          await projection.handle(event, uncommitted.batch);
        }
      }
      const last = events.at(-1)!.position;
      this.#applied = last;
      if (!uncommitted && !this.options.sharedCheckpoints) {
        // Nothing to write: the store already shows these events; the checkpoint follows now and then.
        this.#reached(last);
        if (last - this.#checkpointed >= CHECKPOINT_EVERY_EVENTS) await this.#commit();
        return;
      }
      if (uncommitted) uncommitted.events += events.length;
      const waited = [...this.#waiters].some((w) => w.position <= last);
      const delay = this.options.commitDelayMs ?? COMMIT_DELAY_MS;
      if (waited || delay === 0 || (uncommitted?.events ?? 0) >= MAX_UNCOMMITTED_EVENTS) await this.#commit();
      else this.#commitSoon(delay);
    });
  }

  #commitSoon(delayMs: number): void {
    if (this.#commitTimer !== undefined && delayMs > 0) return;
    clearTimeout(this.#commitTimer);
    this.#commitTimer = setTimeout(() => {
      this.#commitTimer = undefined;
      this.#inTurn(() => this.#commit()).catch((error: unknown) => this.#fail(error));
    }, delayMs);
  }

  /** Writes the uncommitted batch, and every projection's checkpoint at the last applied event. */
  async #commit(): Promise<void> {
    clearTimeout(this.#commitTimer);
    this.#commitTimer = undefined;
    const upTo = this.#applied;
    if (upTo <= this.#checkpointed && !this.#uncommitted) return;
    const batch = this.#uncommitted?.batch;
    const writes = batch?.writes() ?? [];
    this.#uncommitted = undefined;
    const checkpoints: Record<string, number> = {};
    for (const { name } of this.projections) checkpoints[name] = upTo;
    await this.readModels.commit({ writes, checkpoints });
    batch?.committedAll();
    for (const name of Object.keys(checkpoints)) this.#checkpoints.set(name, upTo);
    this.#checkpointed = upTo;
    this.#reached(upTo);
  }

  #reached(position: number): void {
    if (position > this.#position) this.options.onPosition?.(position);
    this.#position = Math.max(this.#position, position);
    for (const waiter of this.#waiters) if (waiter.position <= this.#position) this.#settle(waiter);
  }

  #fail(error: unknown): void {
    this.#halt(error);
    this.#onError(error);
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

/** What services query: read models, never written but by projections. */
export interface ReadModels {
  collection<T extends Document>(name: string): Collection<T>;
  ping(): Promise<void>;
}

/**
 * Read-your-writes at read time: every query first waits until the projections show every event `writer`
 * has appended (a position known in this process, so usually no wait at all), and what it answered before
 * storing (`storing`, see `HandleOptions.answerWhenDecided`) once stored. Writes then answer as soon as they
 * are stored, and a client that reads after a write's answer still sees it.
 */
export function readYourWrites(
  readModels: ReadModelStore,
  projections: Projector,
  writer: { readonly lastAppended: number; readonly storing?: Promise<unknown> | undefined },
): ReadModels {
  const caughtUp = () => {
    const storing = writer.storing;
    return storing ? storing.then(() => projections.waitFor(writer.lastAppended)) : projections.waitFor(writer.lastAppended);
  };
  return {
    collection<T extends Document>(name: string): Collection<T> {
      const collection = readModels.collection<T>(name);
      return {
        findOne: async (filter) => (await caughtUp(), collection.findOne(filter)),
        find: async (filter, options) => (await caughtUp(), collection.find(filter, options)),
        count: async (filter) => (await caughtUp(), collection.count(filter)),
      };
    },
    ping: () => readModels.ping(),
  };
}

/**
 * Read-your-writes across replicas: every query first waits until the projections show the whole log as it
 * stood when the query arrived (`headPosition`), whoever appended to it. Any write answered before the query
 * (by this process, another replica of the service, or another service's process) is then visible, whichever
 * replica or gateway the query reaches; and a client that reads twice never sees the second answer older than
 * the first. The wait is the projections' lag behind the log, usually nothing or a few milliseconds; an empty
 * log needs none.
 */
export function readLatest(readModels: ReadModelStore, projections: Projector, log: Pick<EventStore, 'headPosition'>): ReadModels {
  const caughtUp = async () => {
    const head = await log.headPosition();
    if (head >= 0) await projections.waitFor(head);
  };
  return {
    collection<T extends Document>(name: string): Collection<T> {
      const collection = readModels.collection<T>(name);
      return {
        findOne: async (filter) => (await caughtUp(), collection.findOne(filter)),
        find: async (filter, options) => (await caughtUp(), collection.find(filter, options)),
        count: async (filter) => (await caughtUp(), collection.count(filter)),
      };
    },
    ping: () => readModels.ping(),
  };
}
