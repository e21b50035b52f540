import { pathToFileURL } from 'node:url';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { ManualClock, natsNames } from '@oc/contracts';
import { expect, vi } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { procStat } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');
export const ADMIN_TOKEN = 'test-admin-token-0123456789';
/** Seals webhook secrets in the distributed webhook process (production mode requires one). */
export const WEBHOOK_SECRET_KEY = Buffer.alloc(32, 1).toString('base64');

/** A running service as a client sees it: a base URL and an admin token. */
export interface RunningService {
  mode: 'embedded' | 'distributed';
  url: string;
  adminToken: string;
  /** Where the service keeps its data: embedded, its DATA_DIR; distributed, the directory under which each service keeps its own. */
  dataDir?: string;
  /** Distributed only: the run's NATS_PREFIX, for a test that publishes to the deployment's NATS itself. */
  natsPrefix?: string;
  /** Present only in embedded mode, where the test owns the clock. */
  clock?: ManualClock;
  /** Stops every process and starts them again on the same data. */
  restart(): Promise<void>;
  /** Distributed only: kills one service's process (SIGKILL, no shutdown) and starts it again on its data. */
  crash?(service: string): Promise<void>;
  stop(): Promise<void>;
  /** Started with `captureLogs`: every log line its processes wrote to stdout so far, as pino's JSON records. */
  logs?(): Array<Record<string, unknown>>;
}

/** How a test starts processes beyond their environment. */
export interface ProcessOptions {
  /** Keep what the processes write to stdout (their log lines), for `logs()`, instead of passing it through. */
  captureLogs?: boolean;
}

/**
 * Where processes started with `captureLogs` write (a sink for each, so that two processes' lines never
 * interleave), and their lines read back as pino's records.
 */
function logCapture(capture: boolean | undefined) {
  if (!capture) return { sink: () => undefined, logs: undefined };
  const outputs: string[] = [];
  return {
    sink: () => {
      const index = outputs.push('') - 1;
      return (chunk: Buffer) => void (outputs[index] = `${outputs[index]}${chunk}`);
    },
    logs: () =>
      outputs
        // A line is whole once its newline came: the last piece of each output is empty or still being written.
        .flatMap((output) => output.split('\n').slice(0, -1))
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

export type Starter = (env?: Record<string, string>) => Promise<RunningService>;

export const embedded: Starter = async (env = {}) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'oc-embedded-'));
  const clock = new ManualClock(Date.now());
  const config = loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN, LOG_LEVEL: 'silent', KEY_USAGE_FLUSH_MS: '100', ...env });
  let app: Standalone = await startStandalone({ config, clock });
  const service: RunningService = {
    mode: 'embedded',
    url: app.url,
    dataDir: config.DATA_DIR,
    adminToken: ADMIN_TOKEN,
    clock,
    async restart() {
      await app.close();
      app = await startStandalone({ config: { ...config, PORT: Number(new URL(service.url).port) }, clock });
    },
    async stop() {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return service;
};

const natsUrl = () => process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/**
 * A deployment of its own on the shared NATS server: another run's processes (a second checkout's tests, a
 * bench) never answer this run's requests nor take its events.
 */
export const uniqueNatsPrefix = () => `t${randomBytes(6).toString('hex')}`;

/** The run's JetStream streams (its events, its leases) go with it, so runs do not pile streams up on the server. */
export async function deleteEventsStream(prefix: string, servers = natsUrl()): Promise<void> {
  const nc = await connect({ servers: servers.split(',') });
  try {
    const jsm = await jetstreamManager(nc);
    const { eventsStream, leasesStream } = natsNames(prefix);
    for (const stream of [eventsStream, leasesStream]) await jsm.streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
}

/**
 * A port nobody listens on, for a child process to bind. Taken below the kernel's ephemeral range (32768 and
 * up): a port the kernel handed out (bind to 0) and got back is free again only until any outgoing connection
 * of the machine takes it as its local port, which made a child's later bind fail now and then.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolveFree) => {
      const server = createServer();
      server.once('error', () => resolveFree(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolveFree(true)));
    });
    if (free) return port;
  }
}

/** What each process was started with, so one can be started again alone. */
const launches = new WeakMap<ChildProcess, { service: string; env: Record<string, string> }>();

const EXIT_WITH_PARENT = pathToFileURL(join(import.meta.dirname, 'exit-with-parent.mjs')).href;

/**
 * Starts a service's bundle (`services/<name>/dist/main.js`), what `pnpm start` and the images run: the test
 * setup (`test/global-setup.ts`) builds whatever is older than its sources first. From the TypeScript sources
 * through tsx, every start compiled them again: 5–9 s a process against 1 s, on two cores.
 */
function spawnService(service: string, env: Record<string, string>, stdout?: (chunk: Buffer) => void): ChildProcess {
  const child = spawn(process.execPath, ['--enable-source-maps', '--import', EXIT_WITH_PARENT, join(ROOT, 'services', service, 'dist/main.js')], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', stdout ? 'pipe' : 'inherit', 'inherit', 'ipc'],
  });
  if (stdout) child.stdout!.on('data', stdout);
  launches.set(child, { service, env });
  return child;
}

async function stopProcess(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/**
 * Waits for `/readyz` at `url` (and at each service's HEALTH_PORT in `others`); if it never comes, stops the
 * processes (left running, they would answer other runs).
 */
async function untilReady(url: string, children: ChildProcess[], others: string[] = []) {
  await vi.waitFor(
    async () => {
      for (const c of children) if (c.exitCode !== null) throw new Error(`a service exited with ${c.exitCode}`);
      for (const base of [url, ...others]) {
        const res = await fetch(`${base}/readyz`);
        if (res.status !== 200) throw new Error(`${base} not ready: ${res.status}`);
      }
    },
    // Generous: CI machines have two cores, and a distributed start is five processes.
    { timeout: 120_000, interval: 200 },
  ).catch(async (error: unknown) => {
    await Promise.all(children.map(stopProcess));
    throw error;
  });
}

/**
 * `pnpm start` as a child process on data of its own: a crash is a real SIGKILL of the whole service
 * (`crash('standalone')`), and a test's own work (building large bodies, reading answers) does not share
 * the service's event loop.
 */
export async function standaloneProcess(env: Record<string, string> = {}, options: ProcessOptions = {}): Promise<RunningService> {
  const dataDir = await mkdtemp(join(tmpdir(), 'oc-process-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const launch = { PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN, KEY_USAGE_FLUSH_MS: '100', ...env };
  const { sink, logs } = logCapture(options.captureLogs);
  let child = spawnService('standalone', launch, sink());
  await untilReady(url, [child]);
  const service: RunningService = {
    mode: 'embedded',
    url,
    adminToken: ADMIN_TOKEN,
    ...(logs ? { logs } : {}),
    async restart() {
      await stopProcess(child);
      child = spawnService('standalone', launch, sink());
      await untilReady(url, [child]);
    },
    async crash() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      child = spawnService('standalone', launch, sink());
      await untilReady(url, [child]);
    },
    async stop() {
      await stopProcess(child);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return service;
}

/**
 * Every service as a separate process over the real NATS server, each with its own data. Services share
 * NATS subjects, so e2e files run one at a time (see vitest.config.ts). With `sharedEventStore`, every
 * service appends to one SQLite event store file (`EVENTSTORE_FILE`), as they share one EventStoreDB in
 * production; read models stay per service.
 */
export const distributed = async (env: Record<string, string> = {}, options: { sharedEventStore?: boolean } & ProcessOptions = {}): Promise<RunningService> => {
  const dataDir = await mkdtemp(join(tmpdir(), 'oc-distributed-'));
  const port = await freePort();
  const prefix = uniqueNatsPrefix();
  const common = {
    NATS_URL: natsUrl(),
    NATS_PREFIX: prefix,
    KEY_USAGE_FLUSH_MS: '100',
    ...(options.sharedEventStore ? { EVENTSTORE_FILE: join(dataDir, 'events.sqlite') } : {}),
    ...env,
  };
  // A durable consumer of its own, so another run's webhook process on the same NATS never takes its events.
  const webhookConsumer = `webhook-deliveries-${dataDir.split('-').at(-1)}`;
  // Each service answers its probes on a port of its own, as in a container: ready means every one is.
  const health = Object.fromEntries(await Promise.all(['billing', 'chat', 'webhook', 'video'].map(async (s) => [s, await freePort()] as const)));
  const probes = (service: string) => ({ HEALTH_PORT: String(health[service]), HEALTH_HOST: '127.0.0.1' });
  const { sink, logs } = logCapture(options.captureLogs);
  const spawnCaptured = (service: string, serviceEnv: Record<string, string>) => spawnService(service, serviceEnv, sink());
  let children: ChildProcess[] = [];
  const start = async () => {
    children = [
      spawnCaptured('billing', { ...common, ...probes('billing'), DATA_DIR: join(dataDir, 'billing') }),
      spawnCaptured('chat', { ...common, ...probes('chat'), DATA_DIR: join(dataDir, 'chat') }),
      spawnCaptured('webhook', {
        ...common,
        ...probes('webhook'),
        DATA_DIR: join(dataDir, 'webhook'),
        WEBHOOK_SECRET_KEY,
        WEBHOOK_CONSUMER: webhookConsumer,
      }),
      spawnCaptured('video', {
        ...common,
        ...probes('video'),
        DATA_DIR: join(dataDir, 'video'),
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      }),
      spawnCaptured('gateway', { ...common, PORT: String(port), HOST: '127.0.0.1', ADMIN_TOKEN }),
    ];
    await untilReady(
      `http://127.0.0.1:${port}`,
      children,
      Object.values(health).map((p) => `http://127.0.0.1:${p}`),
    );
  };
  await start();
  return {
    mode: 'distributed',
    dataDir,
    natsPrefix: prefix,
    url: `http://127.0.0.1:${port}`,
    adminToken: ADMIN_TOKEN,
    ...(logs ? { logs } : {}),
    async restart() {
      await Promise.all(children.map(stopProcess));
      await start();
    },
    async crash(name) {
      const index = children.findIndex((c) => launches.get(c)?.service === name);
      const child = children[index];
      if (!child) throw new Error(`no ${name} process`);
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      const { service, env: childEnv } = launches.get(child)!;
      children[index] = spawnCaptured(service, childEnv);
    },
    async stop() {
      await Promise.all(children.map(stopProcess));
      await deleteEventsStream(prefix, common.NATS_URL);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
};

/** A deployment with several gateways and several replicas of every service. */
export interface ReplicatedService extends RunningService {
  /** Every gateway's base URL; `url` is the first. */
  urls: string[];
  /** What `pnpm start:distributed` printed so far (its processes' log lines are prefixed with their names). */
  output(): string;
  /** Kills one process (SIGKILL, no shutdown) and leaves it dead: its replicas carry on without it. */
  kill(name: string): Promise<void>;
}

/** Two consecutive free ports, for two gateways. */
async function freePorts(count: number): Promise<number> {
  for (;;) {
    const first = await freePort();
    const free = await Promise.all(
      Array.from({ length: count - 1 }, (_, i) =>
        new Promise<boolean>((resolveFree) => {
          const server = createServer();
          server.once('error', () => resolveFree(false));
          server.listen(first + i + 1, '127.0.0.1', () => server.close(() => resolveFree(true)));
        }),
      ),
    );
    if (free.every(Boolean)) return first;
  }
}

/**
 * `REPLICAS=n pnpm start:distributed`, run as the README says, on data of its own: n gateways (sharing rate
 * limits through Redis at `redisUrl`, which the script requires for more than one) and n processes each of
 * billing, chat, video and webhook over the real NATS server, all on one SQLite event store file, replicas of a
 * service sharing its data directory and keeping read models of their own. `kill` finds a process by its REPLICA_ID.
 */
export async function replicated(env: Record<string, string> = {}, options: { replicas?: number; redisUrl?: string } = {}): Promise<ReplicatedService> {
  const replicas = options.replicas ?? 2;
  const dataDir = await mkdtemp(join(tmpdir(), 'oc-replicated-'));
  const port = await freePorts(replicas);
  const urls = Array.from({ length: replicas }, (_, i) => `http://127.0.0.1:${port + i}`);
  const prefix = uniqueNatsPrefix();
  let output = '';
  let script: ChildProcess | undefined;
  const start = async () => {
    output = '';
    // Over IPC: should the test process go away, the script stops its processes (see the script).
    const child = spawn(process.execPath, [join(ROOT, 'scripts/start-distributed.mjs')], {
      cwd: ROOT,
      env: {
        ...process.env,
        REPLICAS: String(replicas),
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        ADMIN_TOKEN,
        NATS_URL: natsUrl(),
        NATS_PREFIX: prefix,
        KEY_USAGE_FLUSH_MS: '100',
        LOG_LEVEL: 'warn',
        // A durable consumer of its own, so another run's webhook processes on the same NATS never take its events.
        WEBHOOK_CONSUMER: `webhook-deliveries-${dataDir.split('-').at(-1)}`,
        ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    script = child;
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk;
      process.stderr.write(chunk);
    });
    await vi.waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`start:distributed exited with ${child.exitCode}: ${output}`);
        if (!/^OC API listening on/m.test(output)) throw new Error('not ready yet');
      },
      { timeout: 180_000, interval: 200 },
    ).catch(async (error: unknown) => {
      await stopProcess(child);
      throw error;
    });
  };
  await start();
  const service: ReplicatedService = {
    mode: 'distributed',
    dataDir,
    natsPrefix: prefix,
    url: urls[0]!,
    urls,
    adminToken: ADMIN_TOKEN,
    output: () => output,
    async restart() {
      await stopProcess(script!);
      await start();
    },
    async kill(name) {
      const pid = await replicaPid(dataDir, name, script!.pid!);
      if (pid === undefined) throw new Error(`no process ${name}`);
      process.kill(pid, 'SIGKILL');
      await vi.waitFor(() => expect(output).toContain(`[start:distributed] ${name} stopped (SIGKILL)`), { timeout: 10_000, interval: 20 });
    },
    async crash(name) {
      await service.kill(name);
    },
    async stop() {
      await stopProcess(script!);
      await deleteEventsStream(prefix);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return service;
}

/**
 * The process of this run (its DATA_DIR) running as `replica` (`video-1`), read from /proc (Linux): the one that
 * `start:distributed` (`parent`) started. Its own children (video's ffmpeg helper) share its environment, and
 * with pids wrapping at 32,768 over a test run, a helper may come first in /proc.
 */
async function replicaPid(dataDir: string, replica: string, parent: number): Promise<number | undefined> {
  const { readdir, readFile } = await import('node:fs/promises');
  const service = replica.replace(/-\d+$/, '');
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number((await procStat(entry))?.[1]) !== parent) continue;
      const environ = (await readFile(`/proc/${entry}/environ`, 'utf8')).split('\0');
      if (environ.includes(`REPLICA_ID=${replica}`) && environ.includes(`DATA_DIR=${join(dataDir, service)}`)) return Number(entry);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return undefined;
}
