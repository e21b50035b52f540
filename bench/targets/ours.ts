/**
 * Ours: the standalone service as a child process, or (`--distributed`) `pnpm start:distributed`, each
 * service its own process over the local NATS (each service's built bundle). Generation is as fast as the
 * simulator allows, webhooks may reach the loopback receiver, and chat goes to C.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsNames } from '@oc/contracts';
import { type Processes, ROOT, untilOk } from '../processes';
import { freePort, isFree, type Target } from './start';

export const ADMIN_TOKEN = 'bench-admin-token-0123456789';
const READY_TIMEOUT_MS = 180_000;

/** Node's flags in `pnpm start` (scripts/start.mjs: the heap budget), so that the bench runs the bundle exactly as a user starts it. */
export const START_FLAGS = (() => {
  const flags = /const NODE_FLAGS = \[([^\]]*)\]/.exec(readFileSync(join(ROOT, 'scripts/start.mjs'), 'utf8'))?.[1];
  if (flags === undefined) throw new Error('scripts/start.mjs no longer names its NODE_FLAGS');
  return [...flags.matchAll(/'([^']+)'/g)].map((m) => m[1] as string);
})();

/** Checked once per run: the bench starts the same build several times (the history rounds restart it). */
const checked = new Set<string>();

/**
 * Builds the bundles of `services` in the checkout at `root` that are older than its sources, so that a run
 * measures what its commit says (`pnpm install` builds them all; an edit since would otherwise go unmeasured).
 */
function ensureBuilt(root: string, services: string[]) {
  const key = `${root}:${services.join(',')}`;
  if (checked.has(key)) return;
  execFileSync(process.execPath, [join(root, 'scripts/ensure-built.mjs'), ...services.map((s) => `services/${s}`)], { cwd: root, stdio: 'inherit' });
  checked.add(key);
}

export interface OursTarget extends Target {
  dataDir: string;
}

/** What every mode needs: C as the chat upstream, instant simulated videos, deliveries to loopback. */
const serviceEnv = (upstreamOrigin: string) => ({
  LOG_LEVEL: 'warn',
  CHAT_UPSTREAM: 'openai',
  CHAT_UPSTREAM_BASE_URL: `${upstreamOrigin}/v1`,
  CHAT_UPSTREAM_API_KEY: 'x',
  // Finished at once: a job due now is worked as soon as it is started, so the poll interval plays no part.
  SIM_VIDEO_DURATION_MS: '0',
  WEBHOOK_ALLOW_PRIVATE: '1',
});

export async function startEmbedded(
  processes: Processes,
  options: {
    name: string;
    dataDir: string;
    upstreamOrigin: string;
    readyTimeoutMs?: number;
    /** Another checkout's build (a base to compare with); this one's by default. */
    root?: string;
    /** Node flags beside `pnpm start`'s (`--cpu-prof`, `--max-semi-space-size=32`). */
    flags?: string[];
  },
): Promise<OursTarget> {
  const root = options.root ?? ROOT;
  ensureBuilt(root, ['standalone']);
  const port = await freePort();
  const built = join(root, 'services/standalone/dist/main.js');
  const env = {
    ...serviceEnv(options.upstreamOrigin),
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: options.dataDir,
    ADMIN_TOKEN,
    // As `pnpm start` sets it on Linux.
    MALLOC_ARENA_MAX: '2',
  };
  const started = performance.now();
  const child = processes.node(options.name, [...START_FLAGS, ...(options.flags ?? []), built], env);
  const origin = `http://127.0.0.1:${port}`;
  const startupMs = await untilOk(child, `${origin}/readyz`, started, options.readyTimeoutMs ?? READY_TIMEOUT_MS);
  return { name: options.name, origin, origins: [origin], children: [child], startupMs, dataDir: options.dataDir };
}

/**
 * `pnpm start:distributed` as a user runs it (scripts/start-distributed.mjs): gateway, billing, chat, video
 * and webhook each a process over NATS, `replicas` of each. With more than one, the gateways listen on
 * consecutive ports and share rate limits in Redis, and the load is split over them.
 */
export async function startDistributed(
  processes: Processes,
  options: { name: string; dataDir: string; upstreamOrigin: string; natsUrl: string; redisUrl: string; replicas: number },
): Promise<OursTarget> {
  const { replicas } = options;
  const port = await freePorts(replicas);
  const origins = Array.from({ length: replicas }, (_, i) => `http://127.0.0.1:${port + i}`);
  // A deployment of its own on the NATS server (and Redis): it never shares subjects, its JetStream streams or
  // consumers with another (a user's `pnpm start:distributed`, the tests, an earlier bench), and its streams are
  // deleted when the bench stops, so runs do not pile streams and consumers up on the server.
  const prefix = `bench${randomBytes(4).toString('hex')}`;
  processes.atStop(() => deleteStreams(options.natsUrl, prefix));
  ensureBuilt(ROOT, ['gateway', 'billing', 'chat', 'video', 'webhook']);
  const env = {
    ...serviceEnv(options.upstreamOrigin),
    DATA_DIR: options.dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    ADMIN_TOKEN,
    REPLICAS: String(replicas),
    NATS_URL: options.natsUrl,
    NATS_PREFIX: prefix,
    WEBHOOK_MODE: 'development',
    // Nothing is in flight when the bench stops it; a shorter grace keeps a stuck stop within the bench's own.
    SHUTDOWN_GRACE_MS: '2000',
    ...(replicas > 1 ? { REDIS_URL: options.redisUrl, REDIS_KEY_PREFIX: `${prefix}:` } : {}),
  };
  const started = performance.now();
  // The script stops its services when its IPC channel closes (the bench gone, even killed).
  const script = processes.node(options.name, [join(ROOT, 'scripts/start-distributed.mjs')], env, { exitWithParent: false });
  // Ready once every gateway answers its readiness probe (each once every service answers it).
  const startupMs = Math.max(
    ...(await Promise.all(origins.map((origin) => untilOk(script, `${origin}/readyz`, started, READY_TIMEOUT_MS)))),
  );
  return { name: options.name, origin: origins[0]!, origins, children: [script], startupMs, dataDir: options.dataDir };
}

/** `count` consecutive free ports (a `REPLICAS=n` deployment's gateways listen on PORT … PORT + n − 1). */
async function freePorts(count: number): Promise<number> {
  for (;;) {
    const first = await freePort();
    let all = true;
    for (let i = 1; i < count && all; i++) all = await isFree(first + i);
    if (all) return first;
  }
}

async function deleteStreams(natsUrl: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const { eventsStream, leasesStream } = natsNames(prefix);
    for (const stream of [eventsStream, leasesStream]) await jsm.streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
}
