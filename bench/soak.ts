/**
 * `pnpm bench --soak <minutes>`: the chat path of ours (embedded, C as its upstream, the usual organizations)
 * held at its maximum rate for that long, one minute of load after another. After each minute: the requests
 * answered 2xx and their rate, the service's heap after a forced full collection in each of its threads
 * (`targets/heap-probe.mjs`, asked over IPC) with the memory outside the heap its objects hold, and its resident
 * memory at its highest during the minute (sampled four times a second) and after the collection. At the end,
 * whether heap and external memory stayed within 10% after minute 5, and the highest resident memory. See
 * docs/reliability.md, "Memory under sustained load".
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LoadProcess } from './load-client';
import { FULL, peakResident } from './measure';
import { type Child, type Processes, residentMb, ROOT } from './processes';
import { type Bench, CHAT, chatContenders, NAMES } from './sections';
import { createTenants } from './setup';
import { ADMIN_TOKEN, startEmbedded } from './targets/ours';
import { startScriptTarget } from './targets/start';

const HEAP_PROBE = pathToFileURL(join(ROOT, 'bench/targets/heap-probe.mjs')).href;
/** Minutes of load before the heap must hold still: start-up work and the first minutes' caches fill up. */
const SETTLING_MINUTES = 5;
const FLAT_WITHIN = 0.1;
const RSS_BOUND_MB = 500;

interface Minute {
  minute: number;
  /** Answered 2xx. */
  done: number;
  rps: number;
  failed: number;
  /** After a full collection, every thread's. */
  heapMb: number;
  mainMb: number;
  externalMb: number;
  threads: number;
  gcMs: number;
  /** Resident memory at its highest during the minute's load, and after the collection. */
  peakRssMb: number;
  rssMb: number;
}

const mb = (bytes: number) => bytes / 2 ** 20;

/**
 * The service's memory after a full collection in every one of its threads, in MB: the heap of all of them
 * together and the main thread's (where the services keep their state; the others are the gateway's, the event
 * store's, the projections' and the tokenizer's), the memory outside the heaps their objects hold, and the
 * longest collection.
 */
function heapAfterGc(child: Child): Promise<{ heapMb: number; mainMb: number; externalMb: number; threads: number; gcMs: number }> {
  return new Promise((resolve) => {
    const listen = (message: unknown) => {
      if (typeof message !== 'object' || message === null || !('heapAfterGc' in message)) return;
      child.process.off('message', listen);
      const threads = (message as { heapAfterGc: Array<{ threadId: number; heap: number; external: number; gcMs: number }> }).heapAfterGc;
      resolve({
        heapMb: mb(threads.reduce((sum, t) => sum + t.heap, 0)),
        mainMb: mb(threads.find((t) => t.threadId === 0)!.heap),
        externalMb: mb(threads.reduce((sum, t) => sum + t.external, 0)),
        threads: threads.length,
        gcMs: Math.max(...threads.map((t) => t.gcMs)),
      });
    };
    child.process.on('message', listen);
    child.process.send({ heapAfterGc: true });
  });
}

/**
 * From minute SETTLING_MINUTES on: the lowest and highest of heap and external memory together, and whether the
 * highest is within 10% of the lowest.
 */
function judge(minutes: Minute[]) {
  const settled = minutes.filter((m) => m.minute >= SETTLING_MINUTES).map((m) => m.heapMb + m.externalMb);
  const maxRssMb = Math.max(...minutes.map((m) => Math.max(m.peakRssMb, m.rssMb)));
  if (settled.length < 2) return { flat: undefined, maxRssMb };
  const low = Math.min(...settled);
  const high = Math.max(...settled);
  return { flat: { low, high, spread: (high - low) / low, within: (high - low) / low <= FLAT_WITHIN }, maxRssMb };
}

const row = (m: Minute) =>
  `| ${m.minute} | ${m.done.toLocaleString('en')} | ${Math.round(m.rps).toLocaleString('en')} | ${m.failed} | ${m.heapMb.toFixed(1)} | ${m.mainMb.toFixed(1)} | ${m.externalMb.toFixed(1)} | ${m.gcMs.toFixed(0)} | ${m.peakRssMb.toFixed(0)} | ${m.rssMb.toFixed(0)} |`;

/** `machine` describes the host and the build, for the written figures. */
export async function soak(minutes: number, processes: Processes, runDir: string, machine: string): Promise<boolean> {
  console.log('Starting C and ours…');
  const upstream = await startScriptTarget(processes, 'upstream', 'bench/targets/upstream.ts');
  const ours = await startEmbedded(processes, {
    name: 'ours',
    dataDir: join(runDir, 'ours'),
    upstreamOrigin: upstream.origin,
    flags: ['--expose-gc', '--import', HEAP_PROBE],
  });
  const service = ours.children[0]!;
  const load = await LoadProcess.start(processes);
  console.log(`Creating ${FULL.tenants} enterprise organizations with a key and a video each…`);
  const tenants = await createTenants(ours.origin, ADMIN_TOKEN, FULL.tenants);
  await processes.quiet(FULL.startupWorkMaxMs);
  const b: Bench = { plan: FULL, load, processes, upstream, deployments: [{ name: NAMES.ours, slug: 'ours', target: ours, tenants }] };
  const [contender] = chatContenders(b, b.deployments, 'http', CHAT, []);

  const start = { ...(await heapAfterGc(service)), rssMb: await residentMb(service.process.pid) };
  const intro = [
    `${new Date().toISOString()}, ${machine}.`,
    `Before the load: heap after GC ${start.heapMb.toFixed(1)} MB over ${start.threads} threads (main ${start.mainMb.toFixed(1)} MB), external ${start.externalMb.toFixed(1)} MB, RSS ${start.rssMb.toFixed(0)} MB.`,
    `Chat at ${FULL.connections} connections for ${minutes} minutes, over ${tenants.length} organizations.\n`,
  ].join('\n');
  console.log(intro);
  const head =
    '| minute | requests done (2xx) | req/s | failed | heap after GC, all threads, MB | of it main thread, MB | external, MB | longest GC, ms | RSS at most, MB | RSS after GC, MB |\n|---|---|---|---|---|---|---|---|---|---|';
  console.log(head);
  const rows: Minute[] = [];
  for (let minute = 1; minute <= minutes; minute++) {
    const { result, peaks } = await peakResident({ ours: service.process.pid }, () => load.run({ ...contender!.job, kind: 'http', durationSeconds: 60 }));
    const done = result.requests - result.non2xx;
    const heap = await heapAfterGc(service);
    const m: Minute = {
      minute,
      done,
      rps: done / result.seconds,
      failed: result.non2xx + result.errors,
      ...heap,
      peakRssMb: peaks.ours!,
      rssMb: await residentMb(service.process.pid),
    };
    rows.push(m);
    console.log(row(m));
    if (result.details.length > 0) console.log(`  failures: ${result.details.join('; ')}`);
  }

  const { flat, maxRssMb } = judge(rows);
  const total = rows.reduce((n, m) => n + m.done, 0);
  const summary = [
    `\n${total.toLocaleString('en')} chat requests answered 2xx in ${minutes} minutes (${Math.round(total / (minutes * 60)).toLocaleString('en')} req/s).`,
    flat
      ? `Heap and external memory after GC from minute ${SETTLING_MINUTES} on: ${flat.low.toFixed(1)}–${flat.high.toFixed(1)} MB, a spread of ${(flat.spread * 100).toFixed(1)}%: ${flat.within ? 'flat' : 'NOT flat'} within ${FLAT_WITHIN * 100}%.`
      : `Heap and external memory after GC: not judged, the run is shorter than ${SETTLING_MINUTES + 1} minutes.`,
    `Highest RSS: ${maxRssMb.toFixed(0)} MB (${maxRssMb <= RSS_BOUND_MB ? 'within' : 'OVER'} ${RSS_BOUND_MB} MB).`,
  ].join('\n');
  console.log(summary);
  const file = join(ROOT, 'bench/results', `${new Date().toISOString().slice(0, 16).replace(':', '')}-soak-${minutes}min.txt`);
  await writeFile(file, `${intro}\n${[head, ...rows.map(row)].join('\n')}\n${summary}\n`);
  console.log(`Written to ${file}.`);
  const failed = rows.some((m) => m.failed > 0);
  if (failed) console.error('\n!!! Some requests failed: see the failed column.');
  return !failed && flat?.within !== false && maxRssMb <= RSS_BOUND_MB;
}
