/**
 * The gateway's own cost per request, measured side by side in one run: the same keep-alive load against
 * (a) a bare Express app answering the health body and (b) the full gateway path (key hash + cache,
 * three rate-limit windows, scope check, routing) answering `GET /v1/health`. Prints the ratio and the
 * difference in mean latency, which is what the gateway adds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import express from 'express';
import { loadStandaloneConfig, startStandalone } from '../services/standalone/src/index';

// Three rounds of 500 after 200 of warm-up stay under an enterprise organization's 2,000 requests per minute.
const ROUNDS = 3;
const REQUESTS = 500;
const WARMUP = 200;
const CONNECTIONS = 10;
const autocannonBin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');

/** The load generator runs in its own process so that it does not share the servers' event loop. */
async function load(url: string, headers: Record<string, string>, amount: number) {
  const args = [autocannonBin, '--json', '-c', String(CONNECTIONS), '-a', String(amount)];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  const { stdout } = await promisify(execFile)(process.execPath, [...args, url], { maxBuffer: 16 * 1024 * 1024 });
  const result = JSON.parse(stdout) as { requests: { average: number }; latency: { average: number }; non2xx: number };
  return { rps: result.requests.average, latencyMs: result.latency.average, non2xx: result.non2xx };
}

const dataDir = await mkdtemp(join(tmpdir(), 'oc-bench-'));
const app = await startStandalone({
  config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent' }),
  demo: true,
});
const bare = express();
bare.get('/v1/health', (_req, res) => {
  res.json({ status: 'ok', version: '0.1.0', timestamp: new Date().toISOString() });
});
const bareServer = bare.listen(0, '127.0.0.1');
await new Promise((r) => bareServer.once('listening', r));
const barePort = (bareServer.address() as AddressInfo).port;

// An enterprise organization so the rate limits do not cut the run short.
const headers = { authorization: `Bearer ${app.demo!.key}` };
await fetch(`${app.url}/admin/v1/organizations/${app.demo!.organization.id}`, {
  method: 'PATCH',
  headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
  body: JSON.stringify({ tier: 'enterprise' }),
});
const key = await fetch(`${app.url}/admin/v1/organizations/${app.demo!.organization.id}/keys`, {
  method: 'POST',
  headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
  body: JSON.stringify({ name: 'bench', scopes: ['chat:read'], rate_limit_per_minute: 100_000 }),
}).then((r) => r.json() as Promise<{ key: string }>);
headers.authorization = `Bearer ${key.key}`;

const bareUrl = `http://127.0.0.1:${barePort}/v1/health`;
await load(bareUrl, {}, WARMUP);
await load(`${app.url}/v1/health`, headers, WARMUP);
// Rounds alternate which side goes first, and the median round is reported, to even out machine noise.
const bareRounds: number[] = [];
const gatewayRounds: number[] = [];
let failed = 0;
for (let round = 0; round < ROUNDS; round++) {
  const runBare = () => load(bareUrl, {}, REQUESTS).then((r) => bareRounds.push(r.latencyMs));
  const runGateway = () =>
    load(`${app.url}/v1/health`, headers, REQUESTS).then((r) => {
      gatewayRounds.push(r.latencyMs);
      failed += r.non2xx;
    });
  if (round % 2 === 0) await runBare().then(runGateway);
  else await runGateway().then(runBare);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const bareMs = median(bareRounds);
const gatewayMs = median(gatewayRounds);

console.log(`bare express : mean latency ${bareMs.toFixed(3)} ms (median of ${ROUNDS} rounds of ${REQUESTS}, ${CONNECTIONS} connections)`);
console.log(`full gateway : mean latency ${gatewayMs.toFixed(3)} ms (non-2xx responses: ${failed})`);
console.log(`latency ratio gateway/bare: ${(gatewayMs / bareMs).toFixed(2)}`);

bareServer.close();
await app.close();
await rm(dataDir, { recursive: true, force: true });
process.exit(0);
