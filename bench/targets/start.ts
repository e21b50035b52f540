import { createServer } from 'node:net';
import { type Child, firstMessage, type Processes } from '../processes';

/** A server the bench measures: where it answers and the processes it is made of. */
export interface Target {
  name: string;
  /** Where it is set up and checked (the first of `origins`). */
  origin: string;
  /** Every process's address that takes load: the load is split over them. */
  origins: string[];
  children: Child[];
  /** Spawn until the first 200 from its readiness URL (or its port announcement for the bare targets). */
  startupMs: number;
}

/**
 * A port nobody listens on, for a child process to bind. Taken below the kernel's ephemeral range (32768 and
 * up): a port the kernel handed out (bind to 0) and got back is free again only until any outgoing connection
 * of the machine takes it as its local port, which made a child's later bind fail now and then.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await isFree(port)) return port;
  }
}

/** Whether nothing listens on `port` of the loopback address now. */
export function isFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolveFree(true)));
  });
}

/** One of the bench's own servers (A, B, C): a TypeScript child that announces its port. */
export async function startScriptTarget(processes: Processes, name: string, entry: string): Promise<Target> {
  const started = performance.now();
  const child = processes.tsx(name, entry);
  const { port } = await firstMessage<{ port: number }>(child, 'port', 30_000);
  const origin = `http://127.0.0.1:${port}`;
  return { name, origin, origins: [origin], children: [child], startupMs: performance.now() - started };
}
