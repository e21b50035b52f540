import type { LoadJob, LoadResult } from './jobs';
import { type Child, exited, firstMessage, type Processes } from './processes';

type Reply = { id: number; result: unknown } | { id: number; error: string };

/** The bench's handle on its load process (`bench/load.ts`): one job at a time, answered over IPC. */
export class LoadProcess {
  private nextId = 0;
  /** Raced by every job, so a crash of the load process fails the job at once (one listener for all jobs). */
  private readonly gone: Promise<never>;

  private constructor(private readonly child: Child) {
    this.gone = exited(child);
    // Stopping the load process at the end of the run is no failure when no job is waiting.
    this.gone.catch(() => undefined);
  }

  static async start(processes: Processes): Promise<LoadProcess> {
    const child = processes.tsx('load', 'bench/load.ts');
    await firstMessage(child, 'ready', 30_000);
    return new LoadProcess(child);
  }

  run<J extends LoadJob>(job: J): Promise<LoadResult<J>> {
    const id = this.nextId++;
    const reply = new Promise<LoadResult<J>>((resolve, reject) => {
      const listen = (message: Reply) => {
        if (message.id !== id) return;
        this.child.process.off('message', listen);
        if ('error' in message) reject(new Error(`load process: ${message.error}`));
        else resolve(message.result as LoadResult<J>);
      };
      this.child.process.on('message', listen);
    });
    this.child.process.send({ id, job });
    return Promise.race([reply, this.gone]);
  }
}
