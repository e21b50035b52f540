/**
 * One request at a time, the contenders taken in turn: through ours, through the peer, straight to the
 * upstream, then again in another order. Interleaved request by request, the contenders share every moment's
 * machine, so the difference of their percentiles is what each path adds, not what the host did meanwhile.
 */
import { Agent, request } from 'node:http';
import type { OneAtATimeFigures, OneAtATimeJob, OneAtATimeResult, RequestShape } from './jobs';
import { Samples } from './stats';
import { streamOnce } from './stream-client';

interface Outcome {
  status: number;
  latency: number;
  ttfb?: number;
  problem?: string;
}

/** A plain request, timed to the last byte of its answer. */
function plainOnce(origin: string, shape: RequestShape, agent: Agent): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(`${origin}${shape.path}`, { method: shape.method, headers: shape.headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, latency: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(shape.body);
  });
}

async function streamedOnce(origin: string, shape: RequestShape, agent: Agent): Promise<Outcome> {
  const o = await streamOnce(origin, shape, agent);
  return { status: o.status, latency: o.ttft, ttfb: o.ttfb, ...(o.problem ? { problem: o.problem } : {}) };
}

const percentiles = (s: Samples) => ({ p50: s.percentile(50), p90: s.percentile(90), p99: s.percentile(99) });

export async function oneAtATime(job: OneAtATimeJob): Promise<OneAtATimeResult> {
  // One kept-alive connection per contender's process: no request ever waits for another.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = job.stream ? streamedOnce : plainOnce;
  const state = job.contenders.map((c) => ({
    ...c,
    latency: new Samples(),
    ttfb: new Samples(),
    ok: 0,
    non2xx: 0,
    errors: 0,
    details: new Set<string>(),
  }));
  const end = performance.now() + job.durationSeconds * 1000;
  for (let turn = 0; performance.now() < end; turn++) {
    for (let k = 0; k < state.length; k++) {
      const c = state[(turn + k) % state.length]!;
      const origin = c.origins[turn % c.origins.length]!;
      try {
        const o = await send(origin, c.requests[turn % c.requests.length]!, agent);
        if (o.status < 200 || o.status > 299) {
          c.non2xx++;
          c.details.add(`status ${o.status}`);
        } else if (o.problem) {
          c.errors++;
          c.details.add(o.problem);
        } else {
          c.ok++;
          c.latency.push(o.latency);
          if (o.ttfb !== undefined) c.ttfb.push(o.ttfb);
        }
      } catch (error) {
        c.errors++;
        c.details.add(String((error as Error).message ?? error));
      }
    }
  }
  agent.destroy();
  const result: OneAtATimeResult = {};
  for (const c of state) {
    const figures: OneAtATimeFigures = {
      ok: c.ok,
      latency: percentiles(c.latency),
      ...(job.stream ? { ttfb: percentiles(c.ttfb) } : {}),
      non2xx: c.non2xx,
      errors: c.errors,
      details: [...c.details].slice(0, 10),
    };
    result[c.name] = figures;
  }
  return result;
}
