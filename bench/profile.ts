/**
 * `pnpm bench:profile [--path chat|stream|get|health] [--seconds N] [--before N] [--connections N] [--cpu-prof DIR] [--root DIR]
 * [--node-flags "…"]`:
 * one load on our embedded service (C as its chat upstream), to find where its CPU goes. Prints the CPU time
 * per request of our process, thread by thread, of the upstream and of the load generator; with `--cpu-prof`
 * every thread of ours writes a V8 CPU profile to DIR. `--root` runs another checkout's build (a base to
 * compare with). Not a comparison with the reference servers: that is `pnpm bench`.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { FULL } from './measure';
import { processCpu, Processes, ROOT, threadCpu } from './processes';
import { CHAT } from './sections';
import { createTenants } from './setup';
import { ADMIN_TOKEN, startEmbedded } from './targets/ours';
import { startScriptTarget } from './targets/start';

const { values } = parseArgs({
  options: {
    path: { type: 'string', default: 'chat' },
    seconds: { type: 'string', default: '10' },
    /** Seconds of the same load first, not measured: a service that has been serving for a while. */
    before: { type: 'string', default: '0' },
    connections: { type: 'string', default: '32' },
    tenants: { type: 'string', default: '64' },
    'cpu-prof': { type: 'string' },
    /** More flags for our process (`--node-flags="--max-semi-space-size=32"`). */
    'node-flags': { type: 'string', default: '' },
    root: { type: 'string', default: ROOT },
  },
});
const PATHS = ['chat', 'stream', 'get', 'health'];
if (!PATHS.includes(values.path)) throw new Error(`--path takes ${PATHS.join(', ')}`);

const runDir = await mkdtemp(join(tmpdir(), 'oc-profile-'));
const processes = new Processes(runDir);
try {
  const upstream = await startScriptTarget(processes, 'upstream', 'bench/targets/upstream.ts');
  const ours = await startEmbedded(processes, {
    name: 'ours',
    dataDir: join(runDir, 'data'),
    upstreamOrigin: upstream.origin,
    root: resolve(values.root),
    flags: [...values['node-flags'].split(' ').filter(Boolean), ...(values['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${resolve(values['cpu-prof'])}`] : [])],
  });
  const { origin } = ours;
  const tenants = await createTenants(origin, ADMIN_TOKEN, Number(values.tenants));
  await processes.quiet(FULL.startupWorkMaxMs);

  const chatBody = JSON.stringify(values.path === 'stream' ? { ...CHAT, stream: true, stream_options: { include_usage: true } } : CHAT);
  let next = 0;
  const run = (duration: number) =>
    autocannon({
      url: origin,
      connections: Number(values.connections),
      duration,
      requests: [
        {
          setupRequest: (request) => {
            const tenant = tenants[next++ % tenants.length]!;
            const headers = { authorization: `Bearer ${tenant.key}` };
            if (values.path === 'get') return { ...request, method: 'GET', path: `/v1/videos/${tenant.videoId}`, headers };
            if (values.path === 'health') return { ...request, method: 'GET', path: '/v1/health', headers };
            return { ...request, method: 'POST', path: '/v1/chat/completions', headers: { ...headers, 'content-type': 'application/json' }, body: chatBody };
          },
        },
      ],
    });
  if (Number(values.before) > 0) {
    await run(Number(values.before));
    await processes.quiet(FULL.settleMaxMs);
  }
  const oursPid = ours.children[0]!.process.pid!;
  const upstreamPid = upstream.children[0]!.process.pid!;
  const before = { threads: threadCpu(oursPid), upstream: processCpu(upstreamPid), load: process.cpuUsage() };
  const result = await run(Number(values.seconds));
  const requests = result.requests.total;
  const perRequest = (seconds: number) => `${Math.round((seconds * 1e6) / requests)} µs`;
  const threads = [...threadCpu(oursPid)].map(([thread, cpu]) => [thread, cpu - (before.threads.get(thread) ?? 0)] as const);
  const load = process.cpuUsage(before.load);
  const peakMb = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${oursPid}/status`, 'utf8'))?.[1]) / 1024;

  console.log(
    `${values.path}: ${Math.round(result.requests.average)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, ` +
      `${requests} requests, non-2xx ${result.non2xx}, errors ${result.errors}; ours at most ${Math.round(peakMb)} MB resident`,
  );
  console.log('CPU per request:');
  console.log(`  ours            ${perRequest(threads.reduce((sum, [, cpu]) => sum + cpu, 0))} (${threads.length} threads)`);
  for (const [thread, cpu] of threads.filter(([, cpu]) => cpu > 0).sort((a, b) => b[1] - a[1])) {
    console.log(`    thread ${thread.padEnd(22)} ${perRequest(cpu)}`);
  }
  console.log(`  upstream (C)    ${perRequest(processCpu(upstreamPid) - before.upstream)}`);
  console.log(`  load generator  ${perRequest((load.user + load.system) / 1e6)}`);
} finally {
  await processes.stopAll();
  await rm(runDir, { recursive: true, force: true });
}
