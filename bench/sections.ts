/** The measurements, one function per section of the report; each compares its contenders in one run. */
import type { HttpLoadResult, RequestShape, StreamLoadResult, VideoResult } from './jobs';
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
}

export interface Bench {
  plan: Plan;
  load: LoadProcess;
  processes: Processes;
  upstream: Target;
  peer?: Target;
  nodeHttp?: Target;
  express?: Target;
  deployments: Deployment[];
}

export const NAMES = {
  ours: 'ours',
  distributed: 'ours distributed',
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
  origin: string;
  headers: Record<string, string>;
}

const viaPeer = (b: Bench): Direct => ({ name: NAMES.peer, origin: b.peer!.origin, headers: peerHeaders(b.upstream.origin) });
const toUpstream = (b: Bench): Direct => ({ name: NAMES.upstream, origin: b.upstream.origin, headers: {} });

export function chatContenders(
  b: Bench,
  deployments: Deployment[],
  kind: 'http' | 'stream',
  body: object,
  direct: Direct[],
): Contender[] {
  const text = JSON.stringify(body);
  const chat = (headers: Record<string, string>): RequestShape => ({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { ...JSON_BODY, ...headers },
    body: text,
  });
  const job = (origin: string, requests: RequestShape[]) => ({ kind, origin, connections: b.plan.connections, requests });
  return [
    ...deployments.map((d) => ({ name: d.name, job: job(d.target.origin, perTenant(d.tenants, (t) => chat(bearer(t)))) })),
    ...direct.map((t) => ({ name: t.name, job: job(t.origin, [chat(t.headers)]) })),
  ];
}

export function chatSection(b: Bench) {
  return compare<HttpLoadResult>(b, 'chat', chatContenders(b, b.deployments, 'http', CHAT, [viaPeer(b), toUpstream(b)]));
}

export async function streamSection(b: Bench) {
  const stream = { ...CHAT, stream: true, stream_options: { include_usage: true } };
  const long = { ...stream, max_tokens: LONG_STREAM_TOKENS };
  const contenders = chatContenders(b, b.deployments, 'stream', stream, [toUpstream(b)]);
  return {
    ttfb: await compare<StreamLoadResult>(b, 'stream', contenders),
    // What our path adds to the first byte, without requests queueing behind each other for the CPU.
    ttfbAlone: await compare<StreamLoadResult>(
      b,
      'stream, one at a time',
      contenders.map((c) => ({ ...c, job: { ...c.job, connections: 1 } })),
    ),
    chunks: await compare<StreamLoadResult>(b, 'long stream', chatContenders(b, b.deployments, 'stream', long, [toUpstream(b)])),
  };
}

/** `GET /v1/health` and `GET /v1/videos/{id}` of each deployment, and (`bare`) A and B answering the health body. */
export function getContenders(b: Bench, deployments: Deployment[], bare: boolean): Contender[] {
  const get = (origin: string, requests: RequestShape[]) => ({ kind: 'http' as const, origin, connections: b.plan.connections, requests });
  const health = (t: Target, name: string) => ({ name, job: get(t.origin, [{ method: 'GET', path: '/v1/health', headers: {} }]) });
  return [
    ...deployments.flatMap((d) => [
      { name: NAMES.health(d.name), job: get(d.target.origin, perTenant(d.tenants, (t) => ({ method: 'GET', path: '/v1/health', headers: bearer(t) }))) },
      {
        name: NAMES.video(d.name),
        job: get(d.target.origin, perTenant(d.tenants, (t) => ({ method: 'GET', path: `/v1/videos/${t.videoId}`, headers: bearer(t) }))),
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
