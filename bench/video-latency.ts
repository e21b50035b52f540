/**
 * Create → `video.completed` webhook latency of the whole standalone service, with the simulator set to
 * finish at once (`SIM_VIDEO_DURATION_MS=0`). A script, not a test: run it with
 *
 *   npx -y pnpm@9.15.9 exec tsx bench/video-latency.ts            # both phases
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/video-latency.ts
 *
 * It starts the standalone service in this process (temporary DATA_DIR, silent logs), creates an
 * organization, credit and a key through the admin API, registers a webhook for `video.completed` at a
 * local `node:http` receiver, then measures
 *   1. single jobs, one after another: p50 / p99 / max of create → webhook (after a warm-up);
 *   2. CONCURRENT creates at once: how long until all are accepted, and until the last webhook arrives.
 * Finally it prints the event timeline of one single job (from the event store's `created` times).
 *
 * Environment: SINGLE (default 50), WARMUP (10), CONCURRENT (200), PHASES (`single,concurrent`); passed on to the
 * service: SIM_VIDEO_DURATION_MS (default 0), SIM_VIDEO_PRERENDER (default 1), WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SqliteEventStore } from '../packages/eventstore/src/index';
import { loadStandaloneConfig, startStandalone } from '../services/standalone/src/index';

const SINGLE = Number(process.env.SINGLE ?? 50);
const WARMUP = Number(process.env.WARMUP ?? 10);
const CONCURRENT = Number(process.env.CONCURRENT ?? 200);
const PHASES = new Set((process.env.PHASES ?? 'single,concurrent').split(','));
const ADMIN_TOKEN = 'bench-admin-token-0123456789';

// ---- the receiver: records when each video's `video.completed` arrives ----
const arrivals = new Map<string, number>();
const wallArrivals = new Map<string, number>();
const waiters = new Map<string, (at: number) => void>();
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.now();
    res.writeHead(204).end();
    const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; data: { id: string } };
    if (event.type !== 'video.completed' || arrivals.has(event.data.id)) return;
    arrivals.set(event.data.id, at);
    wallArrivals.set(event.data.id, Date.now());
    waiters.get(event.data.id)?.(at);
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const webhookOf = (id: string) =>
  new Promise<number>((resolve) => {
    const seen = arrivals.get(id);
    if (seen !== undefined) return resolve(seen);
    waiters.set(id, resolve);
  });

// ---- the service ----
const dataDir = await mkdtemp(join(tmpdir(), 'oc-video-latency-'));
const bootStarted = performance.now();
const app = await startStandalone({
  config: loadStandaloneConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    SIM_VIDEO_DURATION_MS: process.env.SIM_VIDEO_DURATION_MS ?? '0',
    WEBHOOK_ALLOW_PRIVATE: '1',
    SIM_VIDEO_PRERENDER: process.env.SIM_VIDEO_PRERENDER ?? '1',
    ...(process.env.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT
      ? { WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT: process.env.WEBHOOK_MAX_CONCURRENCY_PER_ENDPOINT }
      : {}),
  }),
});
const bootMs = performance.now() - bootStarted;

async function call<T = any>(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${app.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
}
async function must<T = any>(method: string, path: string, token: string, body?: unknown): Promise<T> {
  const res = await call<T>(method, path, token, body);
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const org = await must('POST', '/admin/v1/organizations', ADMIN_TOKEN, { name: 'Bench', tier: 'enterprise' });
await must('POST', `/admin/v1/organizations/${org.id}/credits`, ADMIN_TOKEN, { amount: 10_000, description: 'bench' });
const { key } = await must('POST', `/admin/v1/organizations/${org.id}/keys`, ADMIN_TOKEN, {
  name: 'bench',
  scopes: ['video:read', 'video:write', 'webhook:read', 'webhook:write'],
  rate_limit_per_minute: 100_000,
});
await must('POST', '/v1/webhooks', key, { url: receiverUrl, events: ['video.completed'] });

const videoBody = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };

/** One create; resolves with the create's answer time and the webhook's arrival, both from `t0`. */
async function job(): Promise<{ id: string; acceptedMs: number; webhookMs: number }> {
  const t0 = performance.now();
  const video = await must<{ id: string }>('POST', '/v1/videos', key, videoBody);
  const acceptedMs = performance.now() - t0;
  const at = await webhookOf(video.id);
  return { id: video.id, acceptedMs, webhookMs: at - t0 };
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;
function summary(label: string, values: number[]) {
  const s = [...values].sort((a, b) => a - b);
  return `${label}: p50 ${fmt(pct(s, 50))}, p90 ${fmt(pct(s, 90))}, p99 ${fmt(pct(s, 99))}, max ${fmt(s.at(-1)!)}`;
}

console.log(`standalone ready in ${fmt(bootMs)}; receiver ${receiverUrl}`);
let sampleId: string | undefined;
let singleIds: string[] = [];
let concurrentIds: string[] = [];

if (PHASES.has('single')) {
  const first = await job();
  console.log(`first job (cold: renders the clip): create ${fmt(first.acceptedMs)}, webhook ${fmt(first.webhookMs)}`);
  for (let i = 1; i < WARMUP; i++) await job();
  const results = [];
  const cpu = process.cpuUsage();
  if (process.env.MARKS) console.log(`[mark] single phase starts at ${performance.now().toFixed(0)} ms`);
  for (let i = 0; i < SINGLE; i++) results.push(await job());
  if (process.env.MARKS) console.log(`[mark] single phase ends at ${performance.now().toFixed(0)} ms`);
  const used = process.cpuUsage(cpu);
  sampleId = results[Math.floor(results.length / 2)]!.id;
  singleIds = results.map((r) => r.id);
  console.log(`single jobs (n=${SINGLE}, after ${WARMUP} warm-up)`);
  console.log(`  ${summary('create answered', results.map((r) => r.acceptedMs))}`);
  console.log(`  ${summary('create → webhook', results.map((r) => r.webhookMs))}`);
  console.log(`  CPU of this process (service, client and receiver): ${((used.user + used.system) / 1000 / SINGLE).toFixed(1)} ms per job`);
}

if (PHASES.has('concurrent')) {
  const t0 = performance.now();
  const cpu = process.cpuUsage();
  if (process.env.MARKS) console.log(`[mark] concurrent phase starts at ${t0.toFixed(0)} ms`);
  const created = await Promise.all(
    Array.from({ length: CONCURRENT }, async () => {
      const res = await call<{ id: string }>('POST', '/v1/videos', key, videoBody);
      return { status: res.status, id: res.body.id, at: performance.now() };
    }),
  );
  const acceptedAll = Math.max(...created.map((c) => c.at)) - t0;
  const refused = created.filter((c) => c.status !== 200);
  concurrentIds = created.filter((c) => c.status === 200).map((c) => c.id);
  const webhooks = await Promise.all(concurrentIds.map((id) => webhookOf(id)));
  const lastWebhook = Math.max(...webhooks) - t0;
  const used = process.cpuUsage(cpu);
  if (process.env.MARKS) console.log(`[mark] concurrent phase ends at ${(t0 + lastWebhook).toFixed(0)} ms`);
  console.log(`${CONCURRENT} concurrent creates`);
  console.log(`  all answered in ${fmt(acceptedAll)} (${((CONCURRENT / acceptedAll) * 1000).toFixed(0)}/s), refused ${refused.length}`);
  console.log(`  last webhook after ${fmt(lastWebhook)}`);
  console.log(
    `  CPU of this process: ${fmt((used.user + used.system) / 1000)} (${((used.user + used.system) / 1000 / CONCURRENT).toFixed(1)} ms per job)`,
  );
  console.log(`  ${summary('create → webhook', webhooks.map((at) => at - t0))}`);
}

// ---- where the time went, from the log: create path, job pipeline, delivery pipeline ----
const log = new SqliteEventStore({ filename: join(dataDir, 'events.sqlite') });
const all = await log.readAll({ maxCount: 1_000_000 });
function stages(label: string, ids: string[]) {
  const at = new Map<string, Record<string, number>>();
  for (const e of all) {
    if (!e.streamName.startsWith('video-')) continue;
    const id = e.streamName.slice('video-'.length);
    const times = at.get(id) ?? {};
    times[e.type] ??= e.created;
    at.set(id, times);
  }
  const of = (from: string, to: (id: string) => number | undefined) =>
    ids.flatMap((id) => {
      const t0 = at.get(id)?.[from];
      const t1 = to(id);
      return t0 === undefined || t1 === undefined ? [] : [t1 - t0];
    });
  console.log(`${label}, from the event store's times:`);
  console.log(`  ${summary('requested → queued (create path)', of('VideoRequested', (id) => at.get(id)?.VideoQueued))}`);
  console.log(`  ${summary('queued → completed (job pipeline)', of('VideoQueued', (id) => at.get(id)?.VideoCompleted))}`);
  console.log(`  ${summary('completed → received (delivery pipeline)', of('VideoCompleted', (id) => wallArrivals.get(id)))}`);
  // The delivery pipeline in detail: consumed and scheduled, waiting for a lane, the HTTP exchange.
  const deliveries = new Map<string, { video: string; scheduled: number; attempted?: number; durationMs?: number }>();
  for (const e of all) {
    const d = e.data as { delivery_id?: string; event?: { data?: { id?: string } }; duration_ms?: number; at?: number };
    if (e.type === 'DeliveryScheduled') deliveries.set(d.delivery_id!, { video: d.event!.data!.id!, scheduled: e.created });
    if (e.type === 'DeliveryAttempted') Object.assign(deliveries.get(d.delivery_id!) ?? {}, { attempted: d.at, durationMs: d.duration_ms });
  }
  const wanted = new Set(ids);
  const mine = [...deliveries.values()].filter((d) => wanted.has(d.video) && d.attempted !== undefined);
  console.log(`  ${summary('  completed → delivery scheduled', mine.map((d) => d.scheduled - at.get(d.video)!.VideoCompleted!))}`);
  console.log(`  ${summary('  scheduled → attempt ended', mine.map((d) => d.attempted! - d.scheduled))}`);
  console.log(`  ${summary('  HTTP exchange (duration_ms)', mine.map((d) => d.durationMs!))}`);
}
if (singleIds.length) stages(`single jobs`, singleIds);
if (concurrentIds.length) stages(`${CONCURRENT} concurrent`, concurrentIds);

// ---- the timeline of one single job, from the log ----
if (sampleId) {
  const first = all.find((e) => e.streamName === `video-${sampleId}`)!;
  // The video's stream, the deliveries made from it, and what billing recorded for it.
  const streams = new Set(all.filter((e) => JSON.stringify(e.data).includes(sampleId!)).map((e) => e.streamName));
  const events = all.filter(
    (e) => (streams.has(e.streamName) && e.position >= first.position && !e.streamName.startsWith('account-')) || JSON.stringify(e.data).includes(sampleId!),
  );
  const line = (ms: number, where: string, what: string) => console.log(`  +${String(ms).padStart(5)}  ${where.slice(0, 26).padEnd(26)} ${what}`);
  console.log(`timeline of ${sampleId} (event store times, ms after VideoRequested)`);
  for (const e of events) line(e.created - first.created, e.streamName, e.type);
  line(Math.round(wallArrivals.get(sampleId)! - first.created), 'receiver', 'video.completed arrived');
}
await log.close();

await app.close();
receiver.close();
await rm(dataDir, { recursive: true, force: true });
