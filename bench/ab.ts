/**
 * `pnpm bench:ab --a DIR --b DIR [--b-flags "…"] [--rounds N] [--seconds N] [--connections N]`: two builds of
 * our embedded service (two checkouts, or one with other Node flags for B) under the same chat load AT THE
 * SAME TIME, each with its own data directory and 64 organizations, both calling the same upstream (C). Prints
 * per round each side's completions, CPU per completion and p99 latency, and B/A.
 *
 * Why at once: this host's speed swings by a quarter from one minute to the next, so runs one after the other
 * (`pnpm bench:profile`, alternating) could not tell a 5% change from nothing: eight alternating pairs running
 * the same code gave a median B/A of 1.08. Run side by side, both meet the same swings; the same build
 * against itself gives 0.96–1.06 per round (median 1.01). Each side gets about half the machine, so this
 * compares work per request, not the figures `pnpm bench` reports. Not for changes of thread priority: a
 * side's priority takes CPU from the other.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { FULL } from './measure';
import { processCpu, Processes, ROOT } from './processes';
import { CHAT } from './sections';
import { createTenants } from './setup';
import { ADMIN_TOKEN, startEmbedded } from './targets/ours';
import { startScriptTarget } from './targets/start';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: ROOT },
    b: { type: 'string', default: ROOT },
    /** More Node flags for B only (`--b-flags="--max-semi-space-size=32"`). */
    'b-flags': { type: 'string', default: '' },
    rounds: { type: 'string', default: '6' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
  },
});

const runDir = await mkdtemp(join(tmpdir(), 'oc-ab-'));
const processes = new Processes(runDir);
try {
  const upstream = await startScriptTarget(processes, 'upstream', 'bench/targets/upstream.ts');
  const start = async (name: string, root: string, flags: string[]) => {
    const ours = await startEmbedded(processes, { name, dataDir: join(runDir, name), upstreamOrigin: upstream.origin, root: resolve(root), flags });
    return { name, origin: ours.origin, pid: ours.children[0]!.process.pid!, tenants: await createTenants(ours.origin, ADMIN_TOKEN, 64) };
  };
  const sides = [await start('a', values.a, []), await start('b', values.b, values['b-flags'].split(' ').filter(Boolean))];
  await processes.quiet(FULL.startupWorkMaxMs);

  const body = JSON.stringify(CHAT);
  const load = (side: (typeof sides)[number], duration: number) => {
    let next = 0;
    return autocannon({
      url: side.origin,
      connections: Number(values.connections),
      duration,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { authorization: `Bearer ${side.tenants[next++ % side.tenants.length]!.key}`, 'content-type': 'application/json' },
            body,
          }),
        },
      ],
    });
  };
  // Warm both up together first: JIT, caches, the read models' first checkpoint.
  await Promise.all(sides.map((side) => load(side, 5)));

  const ratios: number[] = [];
  for (let round = 1; round <= Number(values.rounds); round++) {
    const before = sides.map((side) => processCpu(side.pid));
    const results = await Promise.all(sides.map((side) => load(side, Number(values.seconds))));
    const line = sides.map((side, i) => {
      const { total } = results[i]!.requests;
      const failed = results[i]!.non2xx + results[i]!.errors;
      const cpu = Math.round(((processCpu(side.pid) - before[i]!) * 1e6) / total);
      return `${side.name.toUpperCase()} ${total} (${cpu} µs/request, p99 ${results[i]!.latency.p99} ms${failed ? `, ${failed} failed` : ''})`;
    });
    const ratio = results[1]!.requests.total / results[0]!.requests.total;
    ratios.push(ratio);
    console.log(`round ${round}: ${line.join(', ')}, B/A ${ratio.toFixed(3)}`);
  }
  ratios.sort((x, y) => x - y);
  const wins = ratios.filter((r) => r > 1).length;
  const middle = ratios.length / 2;
  const median = ratios.length % 2 ? ratios[Math.floor(middle)]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
  console.log(`B/A median ${median.toFixed(3)} (${ratios[0]!.toFixed(3)}–${ratios.at(-1)!.toFixed(3)}), B ahead in ${wins} of ${ratios.length}`);
} finally {
  await processes.stopAll();
  await rm(runDir, { recursive: true, force: true });
}
