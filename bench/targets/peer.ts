/**
 * Target D: the peer gateway, `@portkey-ai/gateway`, proxying C as an OpenAI provider on a custom host. It
 * is installed from its own lockfile under `bench/peer` on first use, outside the pnpm workspace, so that
 * its dependency tree never enters the product's.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Processes, ROOT, untilOk } from '../processes';
import { freePort, type Target } from './start';

const PEER_DIR = join(ROOT, 'bench/peer');
const PEER_MAIN = join(PEER_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');

async function ensureInstalled(): Promise<void> {
  if (existsSync(join(PEER_DIR, 'node_modules'))) return;
  console.log('Installing the peer gateway (npm ci --prefix bench/peer)…');
  const npm = spawn('npm', ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund'], { cwd: ROOT, stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => npm.once('exit', resolve));
  if (code !== 0) throw new Error(`npm ci --prefix bench/peer exited with ${code}`);
}

export async function startPeer(processes: Processes): Promise<Target> {
  await ensureInstalled();
  const port = await freePort();
  const started = performance.now();
  // Headless: no console UI or log stream, only the gateway's routes.
  const child = processes.node('peer', [PEER_MAIN, `--port=${port}`, '--headless']);
  const origin = `http://127.0.0.1:${port}`;
  const startupMs = await untilOk(child, `${origin}/`, started, 60_000);
  return { name: 'peer', origin, children: [child], startupMs };
}

/** What routes a request through the peer to C: OpenAI's API shape on C's address, C's (unchecked) key. */
export const peerHeaders = (upstreamOrigin: string) => ({
  'x-portkey-provider': 'openai',
  'x-portkey-custom-host': `${upstreamOrigin}/v1`,
  authorization: 'Bearer x',
});

/** One completion through the peer must reach C (its counter moves): a peer answering on its own proves nothing. */
export async function checkPeerReachesUpstream(peer: Target, upstream: Target, body: object): Promise<void> {
  const served = async () => ((await (await fetch(`${upstream.origin}/stats`)).json()) as { requests: number }).requests;
  const before = await served();
  const res = await fetch(`${peer.origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...peerHeaders(upstream.origin) },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`The peer answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  if ((await served()) !== before + 1) throw new Error('The peer answered a completion without reaching C');
}
