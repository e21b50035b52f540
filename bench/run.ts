/**
 * `pnpm bench [--quick] [--distributed [--replicas 1,2]] [--history [--history-organizations N]] [--only chat,alone,stream,get,video]`:
 * starts every target in one run, drives them from a separate load process, and prints one report, ratios
 * first. See docs/performance.md for what each row means. `pnpm bench --soak <minutes>` instead holds the chat
 * path at its maximum rate that long and reports the service's memory every minute (`soak.ts`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { historySection, restingMb } from './history';
import { LoadProcess } from './load-client';
import { FULL, QUICK } from './measure';
import { pidsNamed, Processes, ROOT } from './processes';
import { allValid, render, type Results, save } from './report';
import { soak } from './soak';
import { type Bench, CHAT, chatSection, type Deployment, getSection, NAMES, oneAtATimeSection, streamSection, videoSection } from './sections';
import { createTenants } from './setup';
import { HISTORY } from './seed';
import { ADMIN_TOKEN, startDistributed, startEmbedded } from './targets/ours';
import { checkPeerReachesUpstream, PEER_PROCESSES, startPeer } from './targets/peer';
import { startScriptTarget } from './targets/start';

const SECTIONS = ['chat', 'alone', 'stream', 'get', 'video'] as const;
type Section = (typeof SECTIONS)[number];

function options() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      distributed: { type: 'boolean', default: false },
      replicas: { type: 'string' },
      history: { type: 'boolean', default: false },
      'history-organizations': { type: 'string', default: String(HISTORY.organizations) },
      only: { type: 'string' },
      soak: { type: 'string' },
    },
  });
  const only = values.only?.split(',').map((s) => s.trim()) ?? null;
  const unknown = only?.filter((s) => !(SECTIONS as readonly string[]).includes(s)) ?? [];
  if (unknown.length > 0) throw new Error(`--only takes ${SECTIONS.join(', ')}; not ${unknown.join(', ')}`);
  if (values.quick && values.history) console.log('--quick skips --history.');
  const historyOrganizations = Number(values['history-organizations']);
  if (!Number.isInteger(historyOrganizations) || historyOrganizations < 1) throw new Error('--history-organizations takes a positive integer');
  const replicas = (values.replicas ?? '1').split(',').map((r) => Number(r.trim()));
  if (replicas.some((r) => !Number.isInteger(r) || r < 1 || r > 8)) throw new Error('--replicas takes whole numbers from 1 to 8, e.g. 1,2');
  const soakMinutes = values.soak === undefined ? undefined : Number(values.soak);
  if (soakMinutes !== undefined && (!Number.isInteger(soakMinutes) || soakMinutes < 1)) throw new Error('--soak takes a whole number of minutes');
  return {
    soakMinutes,
    quick: values.quick,
    // --replicas alone means --distributed with those counts.
    distributed: values.distributed || values.replicas !== undefined,
    replicas: [...new Set(replicas)],
    history: values.history && !values.quick,
    historyOrganizations,
    only,
  };
}

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

function machine(): Results['machine'] {
  const dirty = git('status', '--porcelain').length > 0;
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    commit: `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' (with uncommitted changes)' : ''}`,
  };
}

async function bench(opts: ReturnType<typeof options>, processes: Processes, runDir: string, began: number): Promise<Results> {
  const plan = opts.quick ? QUICK : FULL;
  const wanted = (s: Section) => opts.only === null || opts.only.includes(s);
  const results: Results = {
    date: new Date().toISOString(),
    machine: machine(),
    options: opts,
    deployments: [NAMES.ours, ...(opts.distributed ? opts.replicas.map(NAMES.distributed) : [])],
    peerProcesses: PEER_PROCESSES,
    plan,
    startupMs: {},
    restingMb: {},
    valid: true,
    seconds: 0,
  };

  console.log('Starting the targets…');
  const [upstream, nodeHttp, express, peer] = await Promise.all([
    startScriptTarget(processes, 'upstream', 'bench/targets/upstream.ts'),
    wanted('get') ? startScriptTarget(processes, 'node-http', 'bench/targets/bare-http.ts') : undefined,
    wanted('get') ? startScriptTarget(processes, 'express', 'bench/targets/bare-express.ts') : undefined,
    wanted('chat') || wanted('alone') || wanted('stream') ? startPeer(processes) : undefined,
  ]);
  if (peer) await checkPeerReachesUpstream(peer, upstream, CHAT);
  for (const t of [upstream, nodeHttp, express, peer]) if (t) results.startupMs[t.name] = t.startupMs;

  // Ours starts alone, so that its start-up time is its own.
  const deployments: Deployment[] = [];
  const embedded = await startEmbedded(processes, { name: 'ours', dataDir: join(runDir, 'ours'), upstreamOrigin: upstream.origin });
  results.startupMs[NAMES.ours] = embedded.startupMs;
  results.restingMb[NAMES.ours] = await restingMb(embedded.children[0]!.process.pid);
  deployments.push({ name: NAMES.ours, slug: 'ours', target: embedded, tenants: [] });
  // Each its own deployment on the same NATS server (and Redis), started one after the other, for the chat section.
  const distributed: Deployment[] = [];
  for (const replicas of opts.distributed && wanted('chat') ? opts.replicas : []) {
    const slug = `distributed-${replicas}`;
    const target = await startDistributed(processes, {
      name: slug,
      dataDir: join(runDir, slug),
      upstreamOrigin: upstream.origin,
      natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      replicas,
    });
    results.startupMs[NAMES.distributed(replicas)] = target.startupMs;
    const servers = await pidsNamed(replicas > 1 ? ['nats-server', 'redis-server'] : ['nats-server']);
    distributed.push({ name: NAMES.distributed(replicas), slug, target, tenants: [], servers });
  }
  for (const t of Object.keys(results.startupMs)) console.log(`  ${t}: ready after ${Math.round(results.startupMs[t]!)} ms`);

  const load = await LoadProcess.start(processes);
  console.log(`Creating ${plan.tenants} enterprise organizations with a key and a video each…`);
  for (const d of [...deployments, ...distributed]) d.tenants = await createTenants(d.target.origin, ADMIN_TOKEN, plan.tenants);
  await processes.quiet(plan.startupWorkMaxMs);

  const b: Bench = { plan, load, processes, upstream, deployments, distributed, ...(peer && { peer }), ...(nodeHttp && { nodeHttp }), ...(express && { express }) };
  if (wanted('chat')) results.chat = await chatSection(b);
  // Measured in the chat section only: stopped, so that their idle processes do not share the cores with the rest.
  for (const d of distributed) await Promise.all(d.target.children.map((c) => processes.stop(c)));
  if (wanted('alone')) results.alone = await oneAtATimeSection(b);
  if (wanted('stream')) results.stream = await streamSection(b);
  if (wanted('get')) results.get = await getSection(b);
  if (wanted('video')) results.video = await videoSection(b);
  if (opts.history) {
    // Hours on a slow storage, and last: a failure here is reported with everything measured before it.
    const baseline = { deployment: deployments[0]!, restingMb: results.restingMb[NAMES.ours]! };
    await historySection(b, baseline, { ...HISTORY, organizations: opts.historyOrganizations }, runDir).then(
      (history) => (results.history = history),
      (error: Error) => {
        results.historyError = error.message;
        console.error(`\n!!! --history failed: ${error.stack ?? error.message}`);
      },
    );
  }
  results.valid = allValid(results) && results.historyError === undefined;
  results.seconds = (performance.now() - began) / 1000;
  return results;
}

const began = performance.now();
const opts = options();
const runDir = await mkdtemp(join(tmpdir(), 'oc-bench-'));
const processes = new Processes(runDir);
process.once('SIGINT', () => void processes.stopAll().then(() => process.exit(130)));

let exitCode = 1;
try {
  if (opts.soakMinutes !== undefined) {
    const { cpu, cores, memoryGb, node, commit } = machine();
    if (await soak(opts.soakMinutes, processes, runDir, `${cpu}, ${cores} cores, ${memoryGb} GB, Node ${node}, commit ${commit}`)) exitCode = 0;
  } else {
    const results = await bench(opts, processes, runDir, began);
    const text = render(results);
    console.log(`\n${text}\n`);
    console.log(`Results written to ${await save(results, text)}${results.options.quick || results.options.only ? '' : ' and docs/performance.md'}.`);
    if (results.valid) exitCode = 0;
    else console.error('\n!!! Some requests failed: the rows marked INVALID do not count. See the messages above.');
  }
} catch (error) {
  console.error(`\n!!! The bench failed: ${(error as Error).stack ?? String(error)}`);
} finally {
  await processes.stopAll();
}
if (exitCode === 0) await rm(runDir, { recursive: true, force: true });
else console.error(`Logs and data kept in ${runDir}`);
process.exit(exitCode);
