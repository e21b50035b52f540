import { MessageChannel, type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { observeSubscriptionLag, SqliteEventStore, startThread } from '@oc/eventstore';
import { ProjectionRunner, type Projector, type ProjectorFactory, type ProjectionSet } from './projection';
import { SqliteReadModelStore } from './sqlite';

/**
 * The projections of a process's services, in a thread of their own beside the services' thread: it follows
 * the SQLite event log (woken by the writer at each commit), applies every service's projections and commits
 * their read models itself, so the services' thread does no projection work. The services keep querying
 * their read model files; read-your-writes waits on positions the thread publishes in shared memory, and
 * costs a message only when a query actually waits.
 */

interface ThreadData {
  eventsFile: string;
  services: Array<{ name: string; readModelFile: string }>;
  /** Per service: [position shown, position a query waits for (-1: none)]. */
  positions: SharedArrayBuffer;
  /** Where the event store's writer announces each commit. */
  commits: MessagePort;
  assertIndexed: boolean;
}

type ThreadEvent =
  | { kind: 'started'; index: number }
  | { kind: 'reached'; index: number }
  | { kind: 'failed'; index: number; message: string }
  | { kind: 'closed' };

const SHOWN = 0;
const WANTED = 1;
/**
 * Each commit costs a transaction whatever its size, and no query needs an event before it asks (it then
 * wakes the thread): so when nobody waits, a batch gathers this long.
 */
const UNWAITED_COMMIT_DELAY_MS = 100;

/** A service's view of its projections running in the projection thread. */
class ThreadProjector implements Projector {
  private readonly waiters = new Set<{ position: number; resolve(): void; reject(error: unknown): void; timer: NodeJS.Timeout }>();
  private halted: Error | undefined;
  private readonly started: Promise<void>;
  private startedSettle!: { resolve(): void; reject(error: unknown): void };

  /** What the service's thread must do before it queries (know the collections its connection will read). */
  prepare: () => Promise<void> = async () => {};
  /** Ends the report of how far these read models are behind the log. */
  unobserve: () => void = () => {};

  constructor(
    private readonly positions: BigInt64Array,
    private readonly index: number,
    private readonly wake: (index: number) => void,
  ) {
    this.started = new Promise((resolve, reject) => (this.startedSettle = { resolve, reject }));
    // A start that fails is reported to start()'s caller; until then nobody may be listening.
    this.started.catch(() => undefined);
  }

  get position(): number {
    return Number(Atomics.load(this.positions, this.index * 2 + SHOWN));
  }

  async start(): Promise<void> {
    await this.prepare();
    await this.started;
  }

  waitFor(position: number, timeoutMs = 5_000): Promise<void> {
    if (position <= this.position) return Promise.resolve();
    if (this.halted) return Promise.reject(this.halted);
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        position,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(waiter);
          this.publishWanted();
          reject(new Error(`Projections did not reach position ${position} within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.waiters.add(waiter);
      this.publishWanted();
      // The thread commits what it has applied at once, rather than gathering more first.
      this.wake(this.index);
      // The thread may have got there between the first look and the wish being published.
      this.reached();
    });
  }

  async stop(): Promise<void> {
    this.unobserve();
    this.halt(new Error('Projection runner stopped'));
  }

  onEvent(event: ThreadEvent): void {
    if (event.kind === 'started') this.startedSettle.resolve();
    else if (event.kind === 'reached') this.reached();
    else if (event.kind === 'failed') {
      const error = new Error(event.message);
      this.startedSettle.reject(error);
      this.halt(error);
    }
  }

  halt(error: Error): void {
    this.halted ??= error;
    for (const waiter of this.waiters) {
      clearTimeout(waiter.timer);
      waiter.reject(this.halted);
    }
    this.waiters.clear();
    this.publishWanted();
  }

  private reached(): void {
    const shown = this.position;
    for (const waiter of this.waiters) {
      if (waiter.position > shown) continue;
      clearTimeout(waiter.timer);
      this.waiters.delete(waiter);
      waiter.resolve();
    }
    this.publishWanted();
  }

  private publishWanted(): void {
    let wanted = -1;
    for (const waiter of this.waiters) if (wanted < 0 || waiter.position < wanted) wanted = waiter.position;
    Atomics.store(this.positions, this.index * 2 + WANTED, BigInt(wanted));
  }
}

export interface ProjectionThread {
  /** Hand to the services: their projections then run in this thread (by service name). */
  readonly projector: ProjectorFactory;
  /** Stops every projection (their last batch committed) and the thread. */
  close(): Promise<void>;
}

/**
 * Starts the thread. `entry` is a module that calls `serveProjections` with every service's projections by
 * name (it cannot receive them: code does not cross threads); `readModelFiles` names each service's file.
 */
export async function startProjectionThread(options: {
  entry: URL;
  eventStore: SqliteEventStore;
  eventsFile: string;
  readModelFiles: Record<string, string>;
  /** The thread died: the process cannot keep its read models current any more. */
  onLost: (error: unknown) => void;
}): Promise<ProjectionThread> {
  const names = Object.keys(options.readModelFiles);
  const positions = new BigInt64Array(new SharedArrayBuffer(names.length * 2 * BigInt64Array.BYTES_PER_ELEMENT));
  for (let i = 0; i < names.length; i++) {
    Atomics.store(positions, i * 2 + SHOWN, -1n);
    Atomics.store(positions, i * 2 + WANTED, -1n);
  }
  const { port1, port2 } = new MessageChannel();
  const data: ThreadData = {
    eventsFile: options.eventsFile,
    services: names.map((name) => ({ name, readModelFile: options.readModelFiles[name]! })),
    positions: positions.buffer as SharedArrayBuffer,
    commits: port2,
    assertIndexed: process.env.OC_ASSERT_INDEXED_QUERIES === '1',
  };
  // Made before the thread starts: it may report a service started before the service asks for its projector.
  const wake = (index: number) => worker.postMessage({ kind: 'wanted', index });
  const projectors = new Map(names.map((name, index) => [name, new ThreadProjector(positions, index, wake)]));
  const worker = startThread(options.entry, { workerData: data, transferList: [port2] });
  let closing: { resolve(): void } | undefined;
  worker.on('message', (event: ThreadEvent) => {
    if (event.kind === 'closed') return closing?.resolve();
    const projector = projectors.get(names[event.index]!);
    projector?.onEvent(event);
  });
  const lost = (error: unknown) => {
    if (closing) return;
    for (const projector of projectors.values()) projector.halt(error instanceof Error ? error : new Error(String(error)));
    options.onLost(error);
  };
  worker.on('error', lost);
  worker.on('exit', (code) => lost(new Error(`The projection thread exited (${code})`)));
  // While the thread loads its code: nothing is committed before this returns, so no commit goes unannounced.
  await options.eventStore.announceCommitsTo(port1);

  return {
    projector: ({ service, set, eventStore, readModels }) => {
      const projector = projectors.get(service);
      if (!projector) throw new Error(`The projection thread has no read model file for '${service}'`);
      // The services' thread queries these collections: its connection must know them.
      projector.prepare = () => readModels.declare(set.collections);
      // Reported from here: the thread itself has no telemetry.
      projector.unobserve = observeSubscriptionLag(`projection.${service}`, eventStore, () => projector.position);
      return projector;
    },
    async close() {
      const closed = new Promise<void>((resolve) => (closing = { resolve }));
      worker.postMessage({ kind: 'close' });
      await closed;
      await worker.terminate();
    },
  };
}

/**
 * The thread's side: every service's projections, each over its own read model file, fed from the event log.
 * Call it from the module the process starts as its projection thread.
 */
export function serveProjections(registry: Record<string, ProjectionSet>): void {
  const data = workerData as ThreadData;
  const positions = new BigInt64Array(data.positions);
  const tell = (event: ThreadEvent) => parentPort!.postMessage(event);
  const events = new SqliteEventStore({ filename: data.eventsFile, readOnly: true });
  const running = data.services.map(({ name, readModelFile }, index) => {
    const set = registry[name];
    if (!set) throw new Error(`No projections registered for '${name}'`);
    const readModels = new SqliteReadModelStore({ filename: readModelFile, writes: 'this-thread', assertIndexed: data.assertIndexed });
    const runner = new ProjectionRunner(events, readModels, set.projections, {
      collections: set.collections,
      // Queries wait in the services' thread and say so (`wanted`): until one does, batches gather.
      commitDelayMs: UNWAITED_COMMIT_DELAY_MS,
      onPosition: (position) => {
        Atomics.store(positions, index * 2 + SHOWN, BigInt(position));
        const wanted = Atomics.load(positions, index * 2 + WANTED);
        if (wanted >= 0n && BigInt(position) >= wanted) tell({ kind: 'reached', index });
      },
      onError: (error) => tell({ kind: 'failed', index, message: error instanceof Error ? error.message : String(error) }),
    });
    const started = runner.start().then(
      () => {
        Atomics.store(positions, index * 2 + SHOWN, BigInt(runner.position));
        tell({ kind: 'started', index });
      },
      (error: unknown) => tell({ kind: 'failed', index, message: error instanceof Error ? error.message : String(error) }),
    );
    return { runner, readModels, started };
  });
  data.commits.on('message', () => events.poll());
  parentPort!.on('message', async (message: { kind: 'close' } | { kind: 'wanted'; index: number }) => {
    if (message.kind === 'wanted') {
      // A query waits: what is applied is committed now, and what is not yet applied as soon as it is.
      const wanted = Number(Atomics.load(positions, message.index * 2 + WANTED));
      if (wanted >= 0) running[message.index]!.runner.waitFor(wanted).catch(() => undefined);
      return;
    }
    await Promise.all(running.map((r) => r.started));
    for (const { runner } of running) await runner.stop();
    await events.close();
    for (const { readModels } of running) await readModels.close();
    data.commits.close();
    tell({ kind: 'closed' });
    parentPort!.close();
  });
}
