/** The measurements, one function per section of the report; each compares its contenders in one run. */
import type { HttpLoadResult, OneAtATimeResult, RequestShape, StreamLoadResult, VideoResult } from './jobs';
import type { LoadProcess } from './load-client';
import { compare, type Contender, type Plan, shoutIfInvalid, type Summary, summarize } from './measure';
import type { Processes } from './processes';
import { registerWebhooks, type Tenant } from './setup';
import type { OursTarget } from './targets/ours';
import { peerHeaders } from './targets/peer';
import type { Target } from './targets/start';

/** Ours as deployed for the run: embedded, or each service as its own process (`--distributed`). */
export interface Deployment {
  name: string;
  /** For receiver paths. */
  slug: string;
  target: OursTarget;
  tenants: Tenant[];
  /** The host's servers it uses but does not start (`start:distributed`'s NATS server and Redis): their pids. */
  servers?: number[];
}

export interface Bench {
  plan: Plan;
  load: LoadProcess;
  processes: Processes;
  upstream: Target;
  peer?: Target;
  nodeHttp?: Target;
  express?: Target;
  /** Measured in every section. */
  deployments: Deployment[];
  /** `--distributed`: `start:distributed` with each `--replicas` count, measured in the chat section only. */
  distributed?: Deployment[];
}

export const NAMES = {
  ours: 'ours',
  distributed: (replicas: number) => `ours distributed, REPLICAS=${replicas}`,
  peer: 'Portkey (D)',
  upstream: 'upstream (C)',
  nodeHttp: 'node:http (A)',
  express: 'Express (B)',
  health: (d: string) => `${d} /v1/health`,
  video: (d: string) => `${d} /v1/videos/{id}`,
};

const JSON_BODY = { 'content-type': 'application/json' };
export const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Say hello to the benchmark.' }], max_tokens: 50 };
/** 500 content chunks from C (10 tokens each), for the sustained relay rate. */
export const LONG_STREAM_TOKENS = 5_000;

const bearer = (tenant: Tenant) => ({ authorization: `Bearer ${tenant.key}` });

/** One request per tenant, so the load rotates keys and spreads over every organization's windows. */
const perTenant = (tenants: Tenant[], shape: (t: Tenant) => RequestShape) => tenants.map(shape);

/** A server that takes chat requests without our keys: the peer (with its routing headers) or C itself. */
interface Direct {
  name: string;
  target: Target;
  headers: Record<string, string>;
}

const viaPeer = (b: Bench): Direct => ({ name: NAMES.peer, target: b.peer!, headers: peerHeaders(b.upstream.origin) });
const toUpstream = (b: Bench): Direct => ({ name: NAMES.upstream, target: b.upstream, headers: {} });

const chatRequest = (body: object) => {
  const text = JSON.stringify(body);
  return (headers: Record<string, string>): RequestShape => ({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { ...JSON_BODY, ...headers },
    body: text,
  });
};

/** Each contender's load split over its processes, and the CPU time of all of them counted per answer. */
export function chatContenders(
  b: Bench,
  deployments: Deployment[],
  kind: 'http' | 'stream',
  body: object,
  direct: Direct[],
): Contender[] {
  const chat = chatRequest(body);
  const contender = (name: string, target: Target, requests: RequestShape[], servers?: number[]): Contender => ({
    name,
    job: { kind, origins: target.origins, connections: b.plan.connections, requests },
    cpu: target.children,
    ...(servers && { servers }),
  });
  return [
    ...deployments.map((d) => contender(d.name, d.target, perTenant(d.tenants, (t) => chat(bearer(t))), d.servers)),
    ...direct.map((t) => contender(t.name, t.target, [chat(t.headers)])),
  ];
}

/** Chat at 32 connections: ours in every deployment of the run, the peer and C, with CPU per answer. */
export function chatSection(b: Bench) {
  return compare<HttpLoadResult>(b, 'chat', chatContenders(b, [...b.deployments, ...(b.distributed ?? [])], 'http', CHAT, [viaPeer(b), toUpstream(b)]));
}

const STREAM = { ...CHAT, stream: true, stream_options: { include_usage: true } };

export async function streamSection(b: Bench) {
  const long = { ...STREAM, max_tokens: LONG_STREAM_TOKENS };
  return {
    ttfb: await compare<StreamLoadResult>(b, 'stream', chatContenders(b, b.deployments, 'stream', STREAM, [...(b.peer ? [viaPeer(b)] : []), toUpstream(b)])),
    chunks: await compare<StreamLoadResult>(b, 'long stream', chatContenders(b, b.deployments, 'stream', long, [toUpstream(b)])),
  };
}

export interface OneAtATimeFiguresByPath {
  /** Plain chat, to the end of the answer. */
  chat: Summary<OneAtATimeResult[string]>;
  /** Streamed chat, to the first content token (and to the first byte). */
  stream: Summary<OneAtATimeResult[string]>;
}

/**
 * One request at a time, ours, the peer and C taken in turn request by request (one-at-a-time.ts): what each
 * path adds on its own, without requests queueing for the CPU. Warmed up, then one run as long as a
 * section's rounds together; every failure, warm-up included, marks the figures invalid.
 */
export async function oneAtATimeSection(b: Bench): Promise<Record<string, OneAtATimeFiguresByPath>> {
  const contenders = (body: object) => {
    const chat = chatRequest(body);
    return [
      ...b.deployments.map((d) => ({ name: d.name, origins: d.target.origins, requests: perTenant(d.tenants, (t) => chat(bearer(t))) })),
      ...[...(b.peer ? [viaPeer(b)] : []), toUpstream(b)].map((t) => ({ name: t.name, origins: t.target.origins, requests: [chat(t.headers)] })),
    ];
  };
  const measure = async (stream: boolean) => {
    const job = { kind: 'one-at-a-time' as const, stream, contenders: contenders(stream ? STREAM : CHAT) };
    await b.processes.quiet(b.plan.settleMaxMs);
    const warmup = await b.load.run({ ...job, durationSeconds: b.plan.warmupSeconds });
    await b.processes.quiet(b.plan.settleMaxMs);
    const measured = await b.load.run({ ...job, durationSeconds: b.plan.rounds * b.plan.durationSeconds });
    const label = stream ? 'streamed, to the first content token' : 'plain';
    const figures: Record<string, Summary<OneAtATimeResult[string]>> = {};
    for (const [name, f] of Object.entries(measured)) {
      figures[name] = summarize([f], [warmup[name]!]);
      console.log(`  one at a time · ${label} · ${name}: ${f.ok} answers, p50 ${f.latency.p50.toFixed(2)} ms, p99 ${f.latency.p99.toFixed(2)} ms`);
      shoutIfInvalid(`one at a time · ${label} · ${name}`, figures[name]);
    }
    return figures;
  };
  const chat = await measure(false);
  const stream = await measure(true);
  return Object.fromEntries(Object.keys(chat).map((name) => [name, { chat: chat[name]!, stream: stream[name]! }]));
}

/** `GET /v1/health` and `GET /v1/videos/{id}` of each deployment, and (`bare`) A and B answering the health body. */
export function getContenders(b: Bench, deployments: Deployment[], bare: boolean): Contender[] {
  const get = (origins: string[], requests: RequestShape[]) => ({ kind: 'http' as const, origins, connections: b.plan.connections, requests });
  const health = (t: Target, name: string) => ({ name, job: get(t.origins, [{ method: 'GET', path: '/v1/health', headers: {} }]) });
  return [
    ...deployments.flatMap((d) => [
      { name: NAMES.health(d.name), job: get(d.target.origins, perTenant(d.tenants, (t) => ({ method: 'GET', path: '/v1/health', headers: bearer(t) }))) },
      {
        name: NAMES.video(d.name),
        job: get(d.target.origins, perTenant(d.tenants, (t) => ({ method: 'GET', path: `/v1/videos/${t.videoId}`, headers: bearer(t) }))),
      },
    ]),
    ...(bare ? [health(b.nodeHttp!, NAMES.nodeHttp), health(b.express!, NAMES.express)] : []),
  ];
}

export function getSection(b: Bench) {
  return compare<HttpLoadResult>(b, 'get', getContenders(b, b.deployments, true));
}

export interface VideoFigures {
  sequential: Summary<VideoResult>;
  burst: Summary<VideoResult>;
  oneEndpoint: Summary<VideoResult>;
  tenEndpoints: Summary<VideoResult>;
}

/**
 * Per deployment, three organizations with webhooks at the load process's receiver: one for single jobs and
 * the burst, one with one endpoint and one with ten endpoints for the delivery rates.
 */
export async function videoSection(b: Bench): Promise<Record<string, VideoFigures>> {
  const { port } = await b.load.run({ kind: 'receiver' });
  const figures: Record<string, VideoFigures> = {};
  for (const d of b.deployments) {
    const [jobs, one, ten] = d.tenants as [Tenant, Tenant, Tenant];
    const paths = {
      jobs: [`/${d.slug}/jobs`],
      one: [`/${d.slug}/one`],
      ten: Array.from({ length: 10 }, (_, i) => `/${d.slug}/ten/${i}`),
    };
    await registerWebhooks(d.target.origin, jobs.key, port, paths.jobs);
    await registerWebhooks(d.target.origin, one.key, port, paths.one);
    await registerWebhooks(d.target.origin, ten.key, port, paths.ten);
    const { video } = b.plan;
    const run = async (label: string, tenant: Tenant, where: string[], count: number, mode: 'sequential' | 'burst') => {
      await b.processes.quiet(b.plan.settleMaxMs);
      const result = await b.load.run({ kind: 'videos', origin: d.target.origin, key: tenant.key, paths: where, count, mode, timeoutMs: video.timeoutMs });
      const summary = summarize([result]);
      console.log(`  video · ${d.name} · ${label}: ${result.count} jobs, ${result.deliveries} deliveries in ${result.seconds.toFixed(2)} s`);
      shoutIfInvalid(`video · ${d.name} · ${label}`, summary);
      return summary;
    };
    figures[d.name] = {
      sequential: await run('one after another', jobs, paths.jobs, video.sequential, 'sequential'),
      burst: await run(`${video.burst} at once`, jobs, paths.jobs, video.burst, 'burst'),
      oneEndpoint: await run('deliveries to 1 endpoint', one, paths.one, video.oneEndpointBatch, 'burst'),
      tenEndpoints: await run('deliveries to 10 endpoints', ten, paths.ten, video.tenEndpointsBatch, 'burst'),
    };
  }
  return figures;
}
