import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vi } from 'vitest';
import { freePort } from './harness';

/**
 * Whether the NATS server is there. Without it the distributed scenarios skip, unless the run says
 * REQUIRE_NATS=1 (CI does), in which case a missing server fails the run instead.
 */
export async function natsReachable(): Promise<boolean> {
  const url = new URL(process.env.NATS_URL ?? 'nats://127.0.0.1:4222');
  const reachable = await new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: url.hostname, port: Number(url.port || 4222) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
  if (!reachable && process.env.REQUIRE_NATS === '1') throw new Error(`REQUIRE_NATS=1 but no NATS server at ${url.href}`);
  return reachable;
}

/**
 * Whether `nats-server` can be run here, for suites that start servers of their own. Without it they skip,
 * unless REQUIRE_NATS=1, where a missing binary fails the run instead.
 */
export function natsServerInstalled(): boolean {
  const installed = spawnSync('nats-server', ['--version']).status === 0;
  if (!installed && process.env.REQUIRE_NATS === '1') throw new Error('REQUIRE_NATS=1 but no nats-server on PATH');
  return installed;
}

export interface NatsClusterNode {
  /** `node-1`, …: the server's name, as JetStream names a stream's leader. */
  name: string;
  url: string;
  /** SIGKILL: the server goes at once, its files and sockets left as they were. */
  kill(): Promise<void>;
}

export interface NatsCluster {
  nodes: NatsClusterNode[];
  /** Every node's client URL, comma-separated, as NATS_URL takes a cluster. */
  urls: string;
  stop(): Promise<void>;
}

/**
 * Three `nats-server` processes clustered on loopback, JetStream on in each (its own store directory), resolved
 * once every node routes to the other two and JetStream's meta group has a leader.
 */
export async function natsCluster(size = 3): Promise<NatsCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'oc-nats-cluster-'));
  const ports = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), cluster: await freePort(), monitor: await freePort() });
  const routes = ports.map((p) => `nats://127.0.0.1:${p.cluster}`).join(',');
  const nodes = ports.map((p, i) => {
    const name = `node-${i + 1}`;
    const args = ['-a', '127.0.0.1', '-p', String(p.client), '-m', String(p.monitor), '-js', '-sd', join(dir, name), '-n', name];
    args.push('--cluster', `nats://127.0.0.1:${p.cluster}`, '--routes', routes, '--cluster_name', 'oc-test', '-l', join(dir, `${name}.log`));
    // Through a shell that kills the server once its stdin closes, which the test process's exit does, even by
    // SIGKILL: a server left behind would hold its ports and keep a stream leader for no one.
    const shell = spawn('sh', ['-c', 'nats-server "$@" & echo $!; read _; kill -9 $! 2>/dev/null', 'sh', ...args], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const pid = new Promise<number>((resolvePid) => shell.stdout.once('data', (chunk: Buffer) => resolvePid(Number(String(chunk).trim()))));
    const exited = new Promise<void>((resolveExit) => shell.once('exit', () => resolveExit()));
    return { name, url: `nats://127.0.0.1:${p.client}`, monitor: `http://127.0.0.1:${p.monitor}`, shell, pid, exited };
  });
  const stop = async () => {
    for (const node of nodes) node.shell.stdin.end();
    await Promise.all(nodes.map((node) => node.exited));
    await rm(dir, { recursive: true, force: true });
  };
  await vi
    .waitFor(
      async () => {
        for (const node of nodes) {
          const routez = (await (await fetch(`${node.monitor}/routez`)).json()) as { num_routes: number };
          const jsz = (await (await fetch(`${node.monitor}/jsz`)).json()) as { meta_cluster?: { leader?: string } };
          if (routez.num_routes !== size - 1 || !jsz.meta_cluster?.leader) throw new Error(`${node.name} not clustered yet`);
        }
      },
      { timeout: 30_000, interval: 200 },
    )
    .catch(async (error: unknown) => {
      await stop();
      throw error;
    });
  return {
    nodes: nodes.map((node) => ({
      name: node.name,
      url: node.url,
      async kill() {
        process.kill(await node.pid, 'SIGKILL');
        // Gone once its monitoring port refuses connections (the shell only reaps it at the end).
        await vi.waitFor(async () => {
          const up = await fetch(`${node.monitor}/varz`).then(() => true, () => false);
          if (up) throw new Error(`${node.name} still up`);
        });
      },
    })),
    urls: nodes.map((node) => node.url).join(','),
    stop,
  };
}
