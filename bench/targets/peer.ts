/**
 * Target D: the peer gateway, `@portkey-ai/gateway`, proxying C as an OpenAI provider on a custom host. It
 * is installed from its own lockfile under `bench/peer` on first use, outside the pnpm workspace, so that
 * its dependency tree never enters the product's.
 */
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Processes, ROOT, untilOk } from '../processes';
import { freePort, type Target } from './start';

const PEER_DIR = join(ROOT, 'bench/peer');
const PEER_MAIN = join(PEER_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');
/** Lets Portkey relay a stream on Node (see the file). */
const FETCH_HEADERS = pathToFileURL(join(PEER_DIR, 'fetch-headers.mjs')).href;

/** Installed, and from the lockfile as it is now (npm keeps a copy of what it installed in node_modules). */
async function ensureInstalled(): Promise<void> {
  const installed = join(PEER_DIR, 'node_modules/.package-lock.json');
  if (existsSync(installed) && statSync(installed).mtimeMs >= statSync(join(PEER_DIR, 'package-lock.json')).mtimeMs) return;
  console.log('Installing the peer gateway (npm ci --prefix bench/peer)…');
  const npm = spawn('npm', ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund'], { cwd: ROOT, stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => npm.once('exit', resolve));
  if (code !== 0) throw new Error(`npm ci --prefix bench/peer exited with ${code}`);
}

/**
 * As many peer processes as the machine has cores, each on a port of its own, the load split over them: ours
 * uses every core (its threads), and Portkey's one process would use one.
 */
export const PEER_PROCESSES = availableParallelism();

export async function startPeer(processes: Processes): Promise<Target> {
  await ensureInstalled();
  const started = performance.now();
  const one = async (n: number) => {
    const port = await freePort();
    // Headless: no console UI or log stream, only the gateway's routes.
    const child = processes.node(`peer-${n}`, ['--import', FETCH_HEADERS, PEER_MAIN, `--port=${port}`, '--headless']);
    const origin = `http://127.0.0.1:${port}`;
    await untilOk(child, `${origin}/`, started, 60_000);
    return { child, origin };
  };
  const all = await Promise.all(Array.from({ length: PEER_PROCESSES }, (_, i) => one(i + 1)));
  const origins = all.map((p) => p.origin);
  return { name: 'peer', origin: origins[0]!, origins, children: all.map((p) => p.child), startupMs: performance.now() - started };
}

/** What routes a request through the peer to C: OpenAI's API shape on C's address, C's (unchecked) key. */
export const peerHeaders = (upstreamOrigin: string) => ({
  'x-portkey-provider': 'openai',
  'x-portkey-custom-host': `${upstreamOrigin}/v1`,
  authorization: 'Bearer x',
});

/** One completion through each peer process must reach C (its counter moves): a peer answering on its own proves nothing. */
export async function checkPeerReachesUpstream(peer: Target, upstream: Target, body: object): Promise<void> {
  const served = async () => ((await (await fetch(`${upstream.origin}/stats`)).json()) as { requests: number }).requests;
  for (const origin of peer.origins) {
    const before = await served();
    const res = await fetch(`${origin}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...peerHeaders(upstream.origin) },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`The peer at ${origin} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    if ((await served()) !== before + 1) throw new Error(`The peer at ${origin} answered a completion without reaching C`);
  }
}
