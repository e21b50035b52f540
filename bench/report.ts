/** The run's figures as markdown tables (ratios first), as JSON under bench/results, and in docs/performance.md. */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { HistoryResults } from './history';
import type { HttpLoadResult, Percentiles, StreamLoadResult } from './jobs';
import { FULL, type Plan, type Summary } from './measure';
import { ROOT } from './processes';
import { median } from './stats';
import { LONG_STREAM_TOKENS, NAMES, type OneAtATimeFiguresByPath, type VideoFigures } from './sections';
import { TOKENS_PER_CHUNK } from './targets/upstream-shape';

export interface Results {
  date: string;
  machine: { cpu: string; cores: number; memoryGb: number; node: string; commit: string };
  options: { quick: boolean; distributed: boolean; replicas: number[]; history: boolean; historyOrganizations: number; only: string[] | null };
  /** Names of ours' deployments, as the rows call them: the one process first, then `start:distributed`'s. */
  deployments: string[];
  /** Portkey's processes, the load split over them. */
  peerProcesses: number;
  plan: Plan;
  /** Spawn to ready, ms. */
  startupMs: Record<string, number>;
  /** VmRSS two seconds after ready, MB. */
  restingMb: Record<string, number>;
  chat?: Record<string, Summary<HttpLoadResult>>;
  /** One request at a time, the contenders in turn. */
  alone?: Record<string, OneAtATimeFiguresByPath>;
  stream?: {
    ttfb: Record<string, Summary<StreamLoadResult>>;
    chunks: Record<string, Summary<StreamLoadResult>>;
  };
  get?: Record<string, Summary<HttpLoadResult>>;
  video?: Record<string, VideoFigures>;
  history?: HistoryResults;
  /** Why `--history` produced no figures (the other sections still count). */
  historyError?: string;
  valid: boolean;
  seconds: number;
}

const START = '<!-- bench:results:start -->';
const END = '<!-- bench:results:end -->';

/** False as soon as one row anywhere saw a failed request. */
export function allValid(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  if ('valid' in value && value.valid === false) return false;
  return Object.values(value).every(allValid);
}

const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const count = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : 'n/a');
const rate = (n: number) => (n >= 100 ? count(n) : fixed(n, 1));
const ms = (n: number) => fixed(n, n >= 100 ? 0 : n >= 10 ? 1 : 2);
const times = (n: number) => `${fixed(n, n >= 10 ? 1 : 2)}×`;
const mark = (row: { valid: boolean } | undefined) => (row && !row.valid ? ' **INVALID**' : '');

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

type Rows = Record<string, Summary<HttpLoadResult>> | undefined;

const WHAT = { rps: 'req/s', p50: 'p50 latency', cpuMsPerRequest: 'CPU per request' } as const;

/**
 * `a ÷ b` of one figure; NaN when either row is missing. Rows measured in the same rounds give the median of
 * each round's ratio: the two ran minutes apart at most within a round, so a machine that speeds up or slows
 * down between rounds moves both alike.
 */
function ratioValue(rows: Rows, a: string, b: string, figure: keyof typeof WHAT): number {
  const x = rows?.[a];
  const y = rows?.[b];
  if (!x || !y) return Number.NaN;
  const paired = x.rounds.length === y.rounds.length && x.rounds.length > 1;
  const of = (r: HttpLoadResult) => r[figure] ?? Number.NaN;
  return paired ? median(x.rounds.map((round, i) => of(round) / of(y.rounds[i]!))) : of(x) / of(y);
}

/** The row of `ratioValue`, flagged when either row is invalid; nothing when either is missing. */
function ratio(label: string, rows: Rows, a: string, b: string, figure: keyof typeof WHAT = 'rps'): string[][] {
  const x = rows?.[a];
  const y = rows?.[b];
  if (!x || !y) return [];
  return [[`${label} ${WHAT[figure]}: ${a} ÷ ${b}`, times(ratioValue(rows, a, b, figure)) + mark(x) + mark(y)]];
}

const added = (a: number, b: number) => `+${ms(a - b)}`;
const addedAll = (a: Percentiles, b: Percentiles) => `${added(a.p50, b.p50)} / ${added(a.p90, b.p90)} / ${added(a.p99, b.p99)} ms`;

function streamRatios(stream: Results['stream'], d: string): string[][] {
  const rows: string[][] = [];
  const [ours, direct] = [stream?.ttfb[d], stream?.ttfb[NAMES.upstream]];
  if (ours && direct) {
    const flags = mark(ours) + mark(direct);
    rows.push([`streaming, ${FULL.connections} at once: time to first content token added by ${d}, p50 / p99`, `${added(ours.ttftP50, direct.ttftP50)} / ${added(ours.ttftP99, direct.ttftP99)} ms${flags}`]);
    rows.push([`streaming, ${FULL.connections} at once: time to first byte added by ${d}, p50 / p99`, `${added(ours.ttfbP50, direct.ttfbP50)} / ${added(ours.ttfbP99, direct.ttfbP99)} ms${flags}`]);
  }
  const [oursLong, directLong] = [stream?.chunks[d], stream?.chunks[NAMES.upstream]];
  if (oursLong && directLong) {
    const value = times(oursLong.chunksPerSecond / directLong.chunksPerSecond) + mark(oursLong) + mark(directLong);
    rows.push([`long streams chunks/s: ${d} ÷ ${NAMES.upstream}`, value]);
  }
  return rows;
}

/** What a path adds over C, one request at a time: plain chat to its whole answer, a stream to its first content token. */
function aloneRatios(alone: Results['alone'], d: string): string[][] {
  const [ours, peer, direct] = [alone?.[d], alone?.[NAMES.peer], alone?.[NAMES.upstream]];
  if (!ours || !direct) return [];
  return (['chat', 'stream'] as const).map((path) => {
    const what = path === 'chat' ? 'plain chat' : 'streamed chat, to the first content token';
    const flags = mark(ours[path]) + mark(direct[path]) + (peer ? mark(peer[path]) : '');
    const oursAdded = ours[path].latency.p50 - direct[path].latency.p50;
    const vsPeer = peer
      ? `; ${NAMES.peer} ${addedAll(peer[path].latency, direct[path].latency)}; p50 added, ours ÷ ${NAMES.peer}: ${times(oursAdded / (peer[path].latency.p50 - direct[path].latency.p50))}`
      : '';
    return [`one request at a time, ${what}: added by ${d}, p50 / p90 / p99`, `${addedAll(ours[path].latency, direct[path].latency)}${vsPeer}${flags}`];
  });
}

/** Issue 29's targets, each beside the figure of this run that it is judged on (when the run measured it). */
function targets(r: Results): string {
  const [ours, ...distributed] = r.deployments as [string, ...string[]];
  const rows: string[][] = [];
  const judge = (met: boolean) => (met ? 'yes' : 'no');
  const alone = r.alone?.[ours];
  const direct = r.alone?.[NAMES.upstream];
  const peer = r.alone?.[NAMES.peer];
  if (alone && direct) {
    for (const path of ['chat', 'stream'] as const) {
      const add = alone[path].latency.p50 - direct[path].latency.p50;
      const peerAdded = peer ? peer[path].latency.p50 - direct[path].latency.p50 : Number.NaN;
      const peerAdd = peer ? `; ${NAMES.peer} +${ms(peerAdded)} ms, ours ÷ ${NAMES.peer} ${times(add / peerAdded)}` : '';
      const what = path === 'chat' ? 'plain chat' : 'time to first content token';
      rows.push([`one request at a time, added p50, ${what} ≤ 1.5 ms`, `+${ms(add)} ms${peerAdd}`, judge(add <= 1.5)]);
    }
  }
  const vsPeer = ratioValue(r.chat, ours, NAMES.peer, 'rps');
  if (Number.isFinite(vsPeer)) {
    rows.push([`chat at ${r.plan.connections} connections ≥ 1.5× ${NAMES.peer} on ${r.peerProcesses} processes`, times(vsPeer), judge(vsPeer >= 1.5)]);
  }
  const p99 = r.chat?.[ours]?.p99;
  if (p99 !== undefined) rows.push([`chat p99 at ${r.plan.connections} connections ≤ 50 ms`, `${ms(p99)} ms`, judge(p99 <= 50)]);
  // REPLICAS=1 against the one process, then each replica count against the one before it.
  const bounds = [2, 1.15];
  distributed.forEach((d, i) => {
    const base = i === 0 ? ours : distributed[i - 1]!;
    const value = ratioValue(r.chat, d, base, 'cpuMsPerRequest');
    const bound = bounds[i];
    if (Number.isFinite(value) && bound !== undefined) rows.push([`CPU per chat request, ${d} ÷ ${base} ≤ ${bound}×`, times(value), judge(value <= bound)]);
  });
  return table(['target', 'this run', 'met'], rows);
}

function ratios(r: Results): string {
  const rows: string[][] = [];
  for (const d of r.deployments) {
    rows.push(...ratio('chat', r.chat, d, NAMES.peer), ...ratio('chat', r.chat, d, NAMES.upstream), ...ratio('chat', r.chat, d, NAMES.peer, 'p50'));
    rows.push(...aloneRatios(r.alone, d), ...streamRatios(r.stream, d));
    rows.push(...ratio('GET', r.get, NAMES.health(d), NAMES.express), ...ratio('GET', r.get, NAMES.video(d), NAMES.express));
    rows.push(...ratio('GET', r.get, NAMES.health(d), NAMES.express, 'p50'), ...ratio('GET', r.get, NAMES.video(d), NAMES.express, 'p50'));
  }
  // Scaling out: each deployment's CPU per chat request against the one before it (REPLICAS=1 ÷ one process, 2 ÷ 1).
  r.deployments.slice(1).forEach((d, i) => rows.push(...ratio('chat', r.chat, d, r.deployments[i]!, 'cpuMsPerRequest')));
  const h = r.history;
  if (h) {
    const { empty, history } = h.names;
    rows.push(...ratio('history, chat', h.chat, history, empty), ...ratio('history, chat', h.chat, history, empty, 'p50'));
    rows.push(...ratio('history, GET', h.get, NAMES.health(history), NAMES.health(empty)), ...ratio('history, GET', h.get, NAMES.video(history), NAMES.video(empty)));
    rows.push([`history: peak resident memory under load, ${history} ÷ ${empty}`, times(h.peakMb[history]! / h.peakMb[empty]!)]);
  }
  return table(['ratio', 'value'], rows);
}

/** With a CPU column when the rows measured it (the chat section: every process of each target, per 2xx answer). */
function loadTable(rows: Rows): string {
  const cpu = Object.values(rows ?? {}).some((row) => row.cpuMsPerRequest !== undefined);
  const servers = Object.values(rows ?? {}).some((row) => row.serversCpuMsPerRequest !== undefined);
  return table(
    [
      'target',
      'req/s (2xx)',
      'p50 ms',
      'p99 ms',
      ...(cpu ? ['CPU ms per request, all its processes'] : []),
      ...(servers ? ['and of the NATS server (and Redis), shared'] : []),
      'requests (all rounds)',
    ],
    Object.entries(rows ?? {}).map(([name, row]) => [
      name + mark(row),
      rate(row.rps),
      ms(row.p50),
      ms(row.p99),
      ...(cpu ? [fixed(row.cpuMsPerRequest ?? Number.NaN, 3)] : []),
      ...(servers ? [row.serversCpuMsPerRequest === undefined ? '' : fixed(row.serversCpuMsPerRequest, 3)] : []),
      count(row.rounds.reduce((n, x) => n + x.requests, 0)),
    ]),
  );
}

function aloneTables(alone: NonNullable<Results['alone']>): string {
  const direct = alone[NAMES.upstream];
  const three = (p: Percentiles) => [ms(p.p50), ms(p.p90), ms(p.p99)];
  const plus = (p: Percentiles, base: Percentiles | undefined) => (base ? addedAll(p, base) : '');
  const plain = table(
    ['target', 'p50 ms', 'p90 ms', 'p99 ms', 'added over C, p50 / p90 / p99', 'answers'],
    Object.entries(alone).map(([name, { chat }]) => [name + mark(chat), ...three(chat.latency), plus(chat.latency, direct?.chat.latency), count(chat.ok)]),
  );
  const streamed = table(
    ['target', 'first byte p50 ms', 'first content token p50 ms', 'p90 ms', 'p99 ms', 'added over C, p50 / p90 / p99', 'streams'],
    Object.entries(alone).map(([name, { stream }]) => [
      name + mark(stream),
      ms(stream.ttfb?.p50 ?? Number.NaN),
      ...three(stream.latency),
      plus(stream.latency, direct?.stream.latency),
      count(stream.ok),
    ]),
  );
  return `Plain chat, to the whole answer:\n\n${plain}\n\nStreamed chat, to the first content token:\n\n${streamed}`;
}

function streamTables(stream: NonNullable<Results['stream']>): string {
  const ttfb = table(
    ['target', 'first content token p50 ms', 'p99 ms', 'first byte p50 ms', 'p99 ms', 'streams/s', 'whole stream p50 ms'],
    Object.entries(stream.ttfb).map(([name, row]) => [
      name + mark(row),
      ms(row.ttftP50),
      ms(row.ttftP99),
      ms(row.ttfbP50),
      ms(row.ttfbP99),
      rate(row.rps),
      ms(row.p50),
    ]),
  );
  const chunks = table(
    ['target', 'chunks/s', 'streams/s', 'TTFB p50 ms', 'whole stream p50 ms'],
    Object.entries(stream.chunks).map(([name, row]) => [name + mark(row), count(row.chunksPerSecond), rate(row.rps), ms(row.ttfbP50), ms(row.p50)]),
  );
  return `${ttfb}\n\nLong streams (\`max_tokens\` ${count(LONG_STREAM_TOKENS)}: ${count(LONG_STREAM_TOKENS / TOKENS_PER_CHUNK)} content chunks each):\n\n${chunks}`;
}

function videoTable(video: Record<string, VideoFigures>): string {
  const rows = Object.entries(video).flatMap(([name, f]) => [
    [`${name}: one after another` + mark(f.sequential), count(f.sequential.count), ms(f.sequential.p50), ms(f.sequential.p99), fixed(f.sequential.jobsPerSecond, 1), '', fixed(f.sequential.seconds, 2), ''],
    [`${name}: ${f.burst.count} at once` + mark(f.burst), count(f.burst.count), ms(f.burst.p50), ms(f.burst.p99), fixed(f.burst.jobsPerSecond, 1), fixed(f.burst.createsSeconds, 2), fixed(f.burst.seconds, 2), rate(f.burst.deliveriesPerSecond)],
    [`${name}: webhooks to 1 endpoint` + mark(f.oneEndpoint), count(f.oneEndpoint.count), ms(f.oneEndpoint.p50), ms(f.oneEndpoint.p99), fixed(f.oneEndpoint.jobsPerSecond, 1), fixed(f.oneEndpoint.createsSeconds, 2), fixed(f.oneEndpoint.seconds, 2), rate(f.oneEndpoint.deliveriesPerSecond)],
    [`${name}: webhooks to 10 endpoints` + mark(f.tenEndpoints), count(f.tenEndpoints.count), ms(f.tenEndpoints.p50), ms(f.tenEndpoints.p99), fixed(f.tenEndpoints.jobsPerSecond, 1), fixed(f.tenEndpoints.createsSeconds, 2), fixed(f.tenEndpoints.seconds, 2), rate(f.tenEndpoints.deliveriesPerSecond)],
  ]);
  return table(['videos', 'jobs', 'create → webhook p50 ms', 'p99 ms', 'jobs/s', 'all created s', 'all delivered s', 'deliveries/s'], rows);
}

function historyTables(h: HistoryResults): string {
  const { empty, history } = h.names;
  const facts = table(
    ['history', 'value'],
    [
      ['events seeded (organizations)', `${count(h.seed.events)} (${count(h.seed.organizations)}) in ${fixed(h.seed.seconds, 0)} s`],
      ['first start-up, read models built from scratch', `${fixed(h.firstStartupMs / 1000, 1)} s`],
      ['second start-up, same data', `${fixed(h.secondStartupMs / 1000, 1)} s`],
      [`resident memory at rest: ${history} / ${empty}`, `${count(h.restingMb[history]!)} / ${count(h.restingMb[empty]!)} MB`],
      [`peak resident memory under load: ${history} / ${empty}`, `${count(h.peakMb[history]!)} / ${count(h.peakMb[empty]!)} MB`],
      ['one seeded organization through the API', `${h.check.ledgerPage} ledger entries and ${h.check.sessionsPage} sessions on the first page, ${h.check.videos} videos, ${h.check.availableUsd} USD available`],
    ],
  );
  return `${facts}\n\nChat completions, not streamed:\n\n${loadTable(h.chat)}\n\nGET:\n\n${loadTable(h.get)}`;
}

export function render(r: Results): string {
  const m = r.machine;
  const p = r.plan;
  const parts = [
    `Run of ${r.date} on ${m.cpu} (${m.cores} cores, ${m.memoryGb} GB), Node ${m.node}, commit ${m.commit}; ` +
      `${p.connections} connections, ${p.rounds} round${p.rounds === 1 ? '' : 's'} of ${p.durationSeconds} s after ${p.warmupSeconds} s of warm-up, ` +
      `keys of ${p.tenants} organizations; medians of the rounds; ${NAMES.peer} as ${r.peerProcesses} processes, the load split between them.` +
      `${r.valid ? '' : ' **Some rows are INVALID: requests failed.**'}`,
    `### Against issue 29's targets\n\n${targets(r)}`,
    `### Ratios\n\n${ratios(r)}`,
    `### Start-up\n\n${table(
      ['target', 'spawn → ready ms', 'resident MB at rest'],
      Object.entries(r.startupMs).map(([name, v]) => [name, count(v), r.restingMb[name] === undefined ? '' : count(r.restingMb[name])]),
    )}`,
  ];
  if (r.chat) parts.push(`### Chat completions, not streamed (\`max_tokens\` 50)\n\n${loadTable(r.chat)}`);
  if (r.alone) parts.push(`### One request at a time\n\n${aloneTables(r.alone)}`);
  if (r.stream) parts.push(`### Chat completions, streamed\n\n${streamTables(r.stream)}`);
  if (r.get) parts.push(`### GET\n\n${loadTable(r.get)}`);
  if (r.video) parts.push(`### Videos and webhooks\n\n${videoTable(r.video)}`);
  if (r.history) parts.push(`### History\n\n${historyTables(r.history)}`);
  if (r.historyError) parts.push(`### History\n\n**Failed**: ${r.historyError}`);
  parts.push(`Whole run: ${fixed(r.seconds, 0)} s.`);
  return parts.join('\n\n');
}

/** Complete runs are kept (results/<date>.json, docs); quick and `--only` runs go to git-ignored files. */
export async function save(r: Results, text: string): Promise<string> {
  const dir = join(ROOT, 'bench/results');
  await mkdir(dir, { recursive: true });
  const day = r.date.slice(0, 10);
  const complete = !r.options.quick && r.options.only === null;
  const file = join(dir, complete ? `${day}.json` : `${r.options.quick ? 'quick' : 'partial'}-${day}.json`);
  await writeFile(file, `${JSON.stringify(r, null, 2)}\n`);
  if (complete) await replaceInDocs(text);
  return file;
}

async function replaceInDocs(text: string): Promise<void> {
  const file = join(ROOT, 'docs/performance.md');
  const doc = await readFile(file, 'utf8');
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/performance.md lacks the ${START} … ${END} markers`);
  await writeFile(file, `${doc.slice(0, start + START.length)}\n${text}\n${doc.slice(end)}`);
}
