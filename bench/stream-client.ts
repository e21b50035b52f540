/**
 * A small concurrent client for streamed chat completions: autocannon times whole responses, so time to
 * first byte (the first `data:` line), time to the first content token and the chunks relayed are read here
 * by hand.
 */
import { Agent, request } from 'node:http';
import type { RequestShape, StreamLoadJob, StreamLoadResult } from './jobs';
import { Samples } from './stats';

export interface StreamOutcome {
  status: number;
  ttfb: number;
  /** To the first chunk with a non-empty `choices[].delta.content`; NaN if none came. */
  ttft: number;
  total: number;
  chunks: number;
  /** Why a 200 stream still failed: an error event, no content, or no `[DONE]`. */
  problem?: string;
}

/**
 * Whether an SSE `data:` line is a chunk with content. Only lines that name `content` are parsed, and only
 * until the first content arrives, so the client does not slow down the long streams it counts.
 */
function hasContent(line: string): boolean {
  if (!line.includes('"content"')) return false;
  try {
    const chunk = JSON.parse(line.slice('data:'.length)) as { choices?: { delta?: { content?: unknown } }[] };
    return chunk.choices?.some((c) => typeof c.delta?.content === 'string' && c.delta.content.length > 0) ?? false;
  } catch {
    return false;
  }
}

export function streamOnce(origin: string, shape: RequestShape, agent: Agent): Promise<StreamOutcome> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(`${origin}${shape.path}`, { method: shape.method, headers: shape.headers, agent }, (res) => {
      let ttfb = Number.NaN;
      let ttft = Number.NaN;
      let chunks = 0;
      let done = false;
      let problem: string | undefined;
      let partial = '';
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        const lines = (partial + text).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (!line.startsWith('data:')) continue;
          if (Number.isNaN(ttfb)) ttfb = performance.now() - started;
          if (line === 'data: [DONE]') done = true;
          else if (line.startsWith('data: {"error"')) problem = line.slice(0, 300);
          else {
            chunks++;
            if (Number.isNaN(ttft) && hasContent(line)) ttft = performance.now() - started;
          }
        }
      });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        if (status === 200 && !done) problem ??= 'stream ended without data: [DONE]';
        if (status === 200 && Number.isNaN(ttft)) problem ??= 'stream carried no content';
        resolve({ status, ttfb, ttft, total: performance.now() - started, chunks, ...(problem ? { problem } : {}) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(shape.body);
  });
}

export async function streamLoad(job: StreamLoadJob): Promise<StreamLoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.connections });
  const ttfb = new Samples();
  const ttft = new Samples();
  const latency = new Samples();
  const details = new Set<string>();
  let next = 0;
  let requests = 0;
  let ok = 0;
  let chunks = 0;
  let non2xx = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + job.durationSeconds * 1000;

  // Connection i keeps to origin i mod n, so the load is split evenly over the processes that listen.
  const connection = async (_: unknown, i: number) => {
    const origin = job.origins[i % job.origins.length]!;
    while (performance.now() < end) {
      const shape = job.requests[next++ % job.requests.length]!;
      try {
        const outcome = await streamOnce(origin, shape, agent);
        requests++;
        chunks += outcome.chunks;
        if (outcome.status < 200 || outcome.status > 299) {
          non2xx++;
          details.add(`status ${outcome.status}`);
        } else if (outcome.problem) {
          errors++;
          details.add(outcome.problem);
        } else {
          ok++;
          ttfb.push(outcome.ttfb);
          ttft.push(outcome.ttft);
          latency.push(outcome.total);
        }
      } catch (error) {
        errors++;
        details.add(String((error as Error).message ?? error));
      }
    }
  };
  await Promise.all(Array.from({ length: job.connections }, connection));
  agent.destroy();
  // In-flight streams finish after the deadline, so rates are over the time until the last one ended.
  const seconds = (performance.now() - started) / 1000;
  return {
    requests,
    ok,
    seconds,
    rps: ok / seconds,
    p50: latency.percentile(50),
    p99: latency.percentile(99),
    ttfbP50: ttfb.percentile(50),
    ttfbP99: ttfb.percentile(99),
    ttftP50: ttft.percentile(50),
    ttftP99: ttft.percentile(99),
    chunksPerSecond: chunks / seconds,
    non2xx,
    errors,
    details: [...details].slice(0, 10),
  };
}
