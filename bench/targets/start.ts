import { createServer } from 'node:net';
import { type Child, firstMessage, type Processes } from '../processes';

/** A server the bench measures: where it answers and the processes it is made of. */
export interface Target {
  name: string;
  origin: string;
  children: Child[];
  /** Spawn until the first 200 from its readiness URL (or its port announcement for the bare targets). */
  startupMs: number;
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
    server.on('error', reject);
  });
}

/** One of the bench's own servers (A, B, C): a TypeScript child that announces its port. */
export async function startScriptTarget(processes: Processes, name: string, entry: string): Promise<Target> {
  const started = performance.now();
  const child = processes.tsx(name, entry);
  const { port } = await firstMessage<{ port: number }>(child, 'port', 30_000);
  return { name, origin: `http://127.0.0.1:${port}`, children: [child], startupMs: performance.now() - started };
}
