/**
 * `--history`: ours on a long event history against ours without one. The seeded store is checked through
 * the API first (the projections must have taken the seeded events), then start-up from scratch, restart on
 * the same data, memory, and the chat and GET figures side by side with the deployment that has no history.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { HttpLoadResult } from './jobs';
import { compare, peakResident, type Summary } from './measure';
import { residentMb } from './processes';
import { type Bench, CHAT, chatContenders, type Deployment, getContenders } from './sections';
import { type SeededOrganization, type SeedShape, seedHistory } from './seed';
import { call, createTenants } from './setup';
import { ADMIN_TOKEN, startEmbedded } from './targets/ours';

export interface HistoryResults {
  seed: { events: number; organizations: number; seconds: number };
  /** What the API lists for one seeded organization. */
  check: { ledgerPage: number; sessionsPage: number; videos: number; availableUsd: number };
  firstStartupMs: number;
  secondStartupMs: number;
  restingMb: Record<string, number>;
  peakMb: Record<string, number>;
  names: { empty: string; history: string };
  chat: Record<string, Summary<HttpLoadResult>>;
  get: Record<string, Summary<HttpLoadResult>>;
}

/** Resident memory once a process has been idle for a moment after it became ready. */
export async function restingMb(pid: number | undefined): Promise<number> {
  await new Promise((r) => setTimeout(r, 2_000));
  return residentMb(pid);
}

/**
 * In-memory read models are rebuilt from the whole log at every start, and on today's storage the rebuild
 * grows with the square of the history (100,000 events: 6 minutes on two cores), so a start may take hours.
 */
const HISTORY_READY_TIMEOUT_MS = 6 * 3_600_000;

type List = { data: { status?: string }[]; has_more: boolean };

async function checkSeeded(origin: string, sample: SeededOrganization, shape: SeedShape): Promise<HistoryResults['check']> {
  const admin = (path: string) => call<List>(origin, ADMIN_TOKEN, 'GET', `/admin/v1/organizations/${sample.orgId}${path}`);
  const ledger = await admin('/ledger?limit=100');
  const balance = await call<{ available: number }>(origin, ADMIN_TOKEN, 'GET', `/admin/v1/organizations/${sample.orgId}/balance`);
  const sessions = await call<List>(origin, sample.key, 'GET', '/v1/chat/completions?limit=100');
  const videos = await call<List>(origin, sample.key, 'GET', '/v1/videos?limit=100');
  const complete =
    ledger.data.length === 100 &&
    ledger.has_more &&
    sessions.data.length === 100 &&
    sessions.has_more &&
    videos.data.length === shape.videosPerOrganization &&
    videos.data.every((v) => v.status === 'completed');
  if (!complete) {
    throw new Error(
      `The seeded history is not what the API lists for ${sample.orgId}: ${ledger.data.length} ledger entries, ` +
        `${sessions.data.length} sessions, ${videos.data.length} videos (${videos.data.map((v) => v.status).join(', ')})`,
    );
  }
  return { ledgerPage: ledger.data.length, sessionsPage: sessions.data.length, videos: videos.data.length, availableUsd: balance.available };
}

/** `baseline`: the deployment without history, and its resident memory measured the same way after its own start. */
export async function historySection(
  b: Bench,
  baseline: { deployment: Deployment; restingMb: number },
  shape: SeedShape,
  runDir: string,
): Promise<HistoryResults> {
  const dataDir = join(runDir, 'history');
  await mkdir(dataDir, { recursive: true });
  console.log(`Seeding ${shape.organizations} organizations of history into ${dataDir}/events.sqlite…`);
  const seeded = await seedHistory(join(dataDir, 'events.sqlite'), shape);
  const start = () =>
    startEmbedded(b.processes, { name: 'ours-history', dataDir, upstreamOrigin: b.upstream.origin, readyTimeoutMs: HISTORY_READY_TIMEOUT_MS });

  const first = await start();
  console.log(`  first start on ${seeded.events.toLocaleString('en')} events: ready after ${(first.startupMs / 1000).toFixed(1)} s`);
  const check = await checkSeeded(first.origin, seeded.sample, shape);
  for (const child of first.children) await b.processes.stop(child);
  const target = await start();
  console.log(`  restart on the same data: ready after ${(target.startupMs / 1000).toFixed(1)} s`);

  const { deployment } = baseline;
  const names = { empty: `${deployment.name} (no history)`, history: `${deployment.name} (${seeded.events.toLocaleString('en')} events)` };
  const pids = { [names.empty]: deployment.target.children[0]!.process.pid, [names.history]: target.children[0]!.process.pid };
  const resting = { [names.empty]: baseline.restingMb, [names.history]: await restingMb(pids[names.history]) };
  const tenants = await createTenants(target.origin, ADMIN_TOKEN, b.plan.tenants);
  await b.processes.quiet(b.plan.startupWorkMaxMs);
  const deployments: Deployment[] = [
    { ...deployment, name: names.empty },
    { name: names.history, slug: 'history', target, tenants },
  ];
  const { result, peaks } = await peakResident(pids, async () => ({
    chat: await compare<HttpLoadResult>(b, 'history chat', chatContenders(b, deployments, 'http', CHAT, [])),
    get: await compare<HttpLoadResult>(b, 'history get', getContenders(b, deployments, false)),
  }));
  return {
    seed: { events: seeded.events, organizations: shape.organizations, seconds: seeded.seconds },
    check,
    firstStartupMs: first.startupMs,
    secondStartupMs: target.startupMs,
    restingMb: resting,
    peakMb: peaks,
    names,
    ...result,
  };
}
