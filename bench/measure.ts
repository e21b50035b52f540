import type { Failures, HttpLoadJob, HttpLoadResult, StreamLoadJob } from './jobs';
import type { LoadProcess } from './load-client';
import { type Child, MS_PER_CLOCK_TICK, pidsCpuTicks, type Processes, residentMb, treeCpuTicks } from './processes';
import { median } from './stats';

export interface Plan {
  connections: number;
  warmupSeconds: number;
  rounds: number;
  durationSeconds: number;
  /** Organizations (each with a key) the load rotates through. */
  tenants: number;
  /** Longest wait for the bench's processes to go quiet before each run. */
  settleMaxMs: number;
  /**
   * Longest wait, once, for a fresh server's start-up work before anything is measured: on a fresh `DATA_DIR`
   * the video simulator renders its clips ahead (ffmpeg, a child of a child).
   */
  startupWorkMaxMs: number;
  video: { sequential: number; burst: number; oneEndpointBatch: number; tenEndpointsBatch: number; timeoutMs: number };
}

export const FULL: Plan = {
  connections: 32,
  warmupSeconds: 5,
  rounds: 3,
  durationSeconds: 10,
  tenants: 256,
  settleMaxMs: 15_000,
  startupWorkMaxMs: 90_000,
  video: { sequential: 50, burst: 200, oneEndpointBatch: 200, tenEndpointsBatch: 100, timeoutMs: 120_000 },
};

/** Enough of everything to prove that each path works end to end, in well under a minute. */
export const QUICK: Plan = {
  connections: 32,
  warmupSeconds: 0.5,
  rounds: 1,
  durationSeconds: 1,
  // Enough organizations that no enterprise window (2,000 requests a minute each) fills up, even when the
  // whole quick run falls within one minute: GETs alone send over 10,000 requests a second.
  tenants: 64,
  settleMaxMs: 0,
  startupWorkMaxMs: 0,
  video: { sequential: 3, burst: 20, oneEndpointBatch: 10, tenEndpointsBatch: 5, timeoutMs: 20_000 },
};

/** A row of a table: the median of each figure over the rounds; invalid if any request failed, warm-up included. */
export type Summary<R extends Failures> = R & { valid: boolean; rounds: R[] };

export function summarize<R extends Failures>(rounds: R[], extra: Failures[] = []): Summary<R> {
  const figures = { ...rounds[0]! };
  for (const key of Object.keys(figures) as (keyof R)[]) {
    if (typeof figures[key] === 'number') figures[key] = median(rounds.map((r) => r[key] as number)) as R[keyof R];
  }
  const all = [...extra, ...rounds];
  figures.non2xx = all.reduce((n, r) => n + r.non2xx, 0);
  figures.errors = all.reduce((n, r) => n + r.errors, 0);
  figures.details = [...new Set(all.flatMap((r) => r.details))];
  return { ...figures, valid: figures.non2xx === 0 && figures.errors === 0, rounds };
}

export interface Contender {
  name: string;
  job: Omit<HttpLoadJob, 'durationSeconds'> | Omit<StreamLoadJob, 'durationSeconds'>;
  /** The processes (and theirs) whose CPU time each run counts, per 2xx answer (`cpuMsPerRequest`). */
  cpu?: Child[];
  /** Servers it uses that are not its own (NATS, Redis), counted apart (`serversCpuMsPerRequest`). */
  servers?: number[];
}

/**
 * Warms each contender up, then runs the rounds; each round reverses the order of the previous one, so no
 * contender always runs first, and every run waits for the servers to go quiet after the previous one.
 */
export async function compare<R extends HttpLoadResult>(
  bench: { load: LoadProcess; plan: Plan; processes: Processes },
  section: string,
  contenders: Contender[],
): Promise<Record<string, Summary<R>>> {
  const { load, plan } = bench;
  const run = async (c: Contender, durationSeconds: number) => {
    await bench.processes.quiet(plan.settleMaxMs);
    const job = { ...c.job, durationSeconds } as HttpLoadJob | StreamLoadJob;
    if (!c.cpu) return (await load.run(job)) as R;
    const servers = c.servers ?? [];
    const before = { own: await treeCpuTicks(c.cpu), servers: await pidsCpuTicks(servers) };
    const result = (await load.run(job)) as R;
    // The work the answers left behind (projections, the outbox's publishing) is theirs: counted until quiet.
    await bench.processes.quiet(plan.settleMaxMs, c.cpu);
    const perRequest = (ticks: number) => (ticks * MS_PER_CLOCK_TICK) / result.ok;
    return {
      ...result,
      cpuMsPerRequest: perRequest((await treeCpuTicks(c.cpu)) - before.own),
      ...(servers.length > 0 ? { serversCpuMsPerRequest: perRequest((await pidsCpuTicks(servers)) - before.servers) } : {}),
    };
  };
  const warmups = new Map<string, R>();
  const rounds = new Map<string, R[]>(contenders.map((c) => [c.name, []]));
  for (const c of contenders) warmups.set(c.name, await run(c, plan.warmupSeconds));
  for (let round = 0; round < plan.rounds; round++) {
    const order = round % 2 === 0 ? contenders : [...contenders].reverse();
    for (const c of order) {
      const result = await run(c, plan.durationSeconds);
      rounds.get(c.name)!.push(result);
      const failures = result.non2xx + result.errors > 0 ? `, ${result.non2xx} non-2xx, ${result.errors} errors` : '';
      console.log(`  ${section} · ${c.name} · round ${round + 1}: ${result.rps.toFixed(1)} req/s, p50 ${result.p50.toFixed(2)} ms${failures}`);
    }
  }
  const summaries: Record<string, Summary<R>> = {};
  for (const c of contenders) {
    const summary = summarize(rounds.get(c.name)!, [warmups.get(c.name)!]);
    shoutIfInvalid(`${section} · ${c.name}`, summary);
    summaries[c.name] = summary;
  }
  return summaries;
}

/** Failed requests are never averaged away: they are printed on stderr and the row is marked invalid. */
export function shoutIfInvalid(what: string, row: Failures & { valid: boolean }): void {
  if (row.valid) return;
  console.error(`\n!!! INVALID ${what}: ${row.non2xx} non-2xx responses, ${row.errors} errors`);
  for (const detail of row.details) console.error(`!!!   ${detail}`);
  console.error('');
}

/** Samples resident memory of processes while `work` runs, and keeps each one's peak. */
export async function peakResident<T>(pids: Record<string, number | undefined>, work: () => Promise<T>) {
  const peaks: Record<string, number> = {};
  const sample = async () => {
    for (const [name, pid] of Object.entries(pids)) {
      const mb = await residentMb(pid);
      if (mb > (peaks[name] ?? 0)) peaks[name] = mb;
    }
  };
  const timer = setInterval(() => void sample(), 250);
  try {
    return { result: await work(), peaks };
  } finally {
    clearInterval(timer);
    await sample();
  }
}
