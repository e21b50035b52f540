import { once } from 'node:events';
import { type Transferable, Worker, type WorkerOptions } from 'node:worker_threads';

/** Requests to a worker thread that answers `{id, result}` or `{id, error}` to each `{id, …}` it is sent. */
export interface WorkerCalls {
  /** `transfer`: what moves to the worker rather than being copied (a `MessagePort`). */
  call<T>(message: Record<string, unknown>, transfer?: Transferable[]): Promise<T>;
  /** Sends `{kind: 'close'}` and waits for the worker to exit. */
  close(): Promise<void>;
}

/**
 * A worker's young generation. V8 sizes each thread's as the main thread's (up to 32 MB on a large host, kept
 * committed while busy); these threads hold one commit or one count at a time, so a small one costs a few more
 * scavenges and saves tens of MB of RSS per thread under sustained load (docs/reliability.md, Memory).
 */
const WORKER_YOUNG_GENERATION_MB = 4;

/**
 * Starts a worker that keeps the process alive only while a call is on its way, so an open store never
 * holds a finished program up. Once the worker stops (an error, an exit), every call fails.
 */
export function startWorker(url: URL, workerData: unknown, name: string): WorkerCalls {
  const worker = new Worker(url, { workerData, resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB } });
  worker.unref();
  const calls = new Map<number, { resolve(result: unknown): void; reject(error: unknown): void }>();
  let nextId = 0;
  let stopped: Error | undefined;
  const stop = (error: Error) => {
    stopped ??= error;
    for (const call of calls.values()) call.reject(stopped);
    calls.clear();
  };
  worker.on('message', ({ id, result, error }: { id: number; result?: unknown; error?: string }) => {
    const call = calls.get(id);
    calls.delete(id);
    if (calls.size === 0) worker.unref();
    if (error === undefined) call?.resolve(result);
    else call?.reject(new Error(error));
  });
  worker.on('error', stop);
  worker.on('exit', () => stop(new Error(`The ${name} has stopped`)));
  return {
    call: <T>(message: Record<string, unknown>, transfer?: Transferable[]) =>
      new Promise<T>((resolve, reject) => {
        if (stopped) return reject(stopped);
        const id = nextId++;
        if (calls.size === 0) worker.ref();
        calls.set(id, { resolve: resolve as (result: unknown) => void, reject });
        worker.postMessage({ ...message, id }, transfer);
      }),
    close: async () => {
      if (stopped) return;
      const exited = once(worker, 'exit');
      worker.ref();
      worker.postMessage({ kind: 'close' });
      await exited;
    },
  };
}

/**
 * A thread running `entry`: a built JavaScript file beside a bundle, or a TypeScript module from the sources
 * (tests, tsx), which the thread runs through tsx (`ts-thread.mjs`).
 */
export function startThread(entry: URL, options: Pick<WorkerOptions, 'workerData' | 'transferList' | 'resourceLimits'> = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  return new Worker(new URL('./ts-thread.mjs', import.meta.url), { ...options, workerData: { ...options.workerData, entry: entry.href } });
}
