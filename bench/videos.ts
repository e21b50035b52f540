/**
 * Video create → `video.completed` webhook, timed in the load process: it sends the creates and also runs
 * the receiver the webhooks post to, so both ends of each job are read on one clock.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VideoJob, VideoResult } from './jobs';
import { percentile } from './stats';

export const VIDEO_REQUEST = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };

/** Records when each video's `video.completed` reached each path; any path is one webhook endpoint. */
export class Receiver {
  private readonly arrivals = new Map<string, number>();
  private readonly waiters = new Map<string, (at: number) => void>();

  async listen(): Promise<number> {
    const server = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (part: Buffer) => parts.push(part));
      req.on('end', () => {
        const at = performance.now();
        res.writeHead(200).end();
        const event = JSON.parse(Buffer.concat(parts).toString('utf8')) as { type: string; data: { id: string } };
        if (event.type === 'video.completed') this.arrive(`${req.url} ${event.data.id}`, at);
      });
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  /** When the video's webhook reached the path; it may well have arrived before anyone asked. */
  arrival(path: string, videoId: string, timeoutMs: number): Promise<number> {
    const key = `${path} ${videoId}`;
    const at = this.arrivals.get(key);
    if (at !== undefined) return Promise.resolve(at);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(key);
        reject(new Error(`no video.completed for ${videoId} at ${path} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.set(key, (arrived) => {
        clearTimeout(timer);
        resolve(arrived);
      });
    });
  }

  private arrive(key: string, at: number): void {
    if (this.arrivals.has(key)) return; // a retried delivery: the first arrival counts
    this.arrivals.set(key, at);
    this.waiters.get(key)?.(at);
    this.waiters.delete(key);
  }
}

interface Job {
  sent: number;
  answered: number;
  arrivals: number[];
}

/** A create answered with an error status: counted as a non-2xx response, not as a lost webhook. */
class CreateRefused extends Error {}

type Outcome = { job: Job } | { failure: Error };

async function createAndAwait(job: VideoJob, receiver: Receiver): Promise<Job> {
  const sent = performance.now();
  const res = await fetch(`${job.origin}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${job.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(VIDEO_REQUEST),
  });
  const answered = performance.now();
  const body = await res.text();
  if (!res.ok) throw new CreateRefused(`create answered ${res.status}: ${body.slice(0, 300)}`);
  const { id } = JSON.parse(body) as { id: string };
  const arrivals = await Promise.all(job.paths.map((path) => receiver.arrival(path, id, job.timeoutMs)));
  return { sent, answered, arrivals };
}

export async function runVideos(job: VideoJob, receiver: Receiver): Promise<VideoResult> {
  const attempt = () =>
    createAndAwait(job, receiver).then(
      (done): Outcome => ({ job: done }),
      (failure: Error): Outcome => ({ failure }),
    );
  const outcomes: Outcome[] = [];
  if (job.mode === 'sequential') for (let i = 0; i < job.count; i++) outcomes.push(await attempt());
  else outcomes.push(...(await Promise.all(Array.from({ length: job.count }, attempt))));

  const jobs = outcomes.flatMap((o) => ('job' in o ? [o.job] : []));
  const failures = outcomes.flatMap((o) => ('failure' in o ? [o.failure] : []));
  const latencies = jobs.map((j) => Math.max(...j.arrivals) - j.sent);
  const arrivals = jobs.flatMap((j) => j.arrivals);
  const start = Math.min(...jobs.map((j) => j.sent));
  const lastArrival = Math.max(...arrivals);
  const seconds = (lastArrival - start) / 1000;
  return {
    count: jobs.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    seconds,
    jobsPerSecond: jobs.length / seconds,
    createsSeconds: (Math.max(...jobs.map((j) => j.answered)) - start) / 1000,
    deliveries: arrivals.length,
    // Intervals between arrivals, so the first delivery's own latency does not count against the rate.
    deliveriesPerSecond: (arrivals.length - 1) / ((lastArrival - Math.min(...arrivals)) / 1000),
    non2xx: failures.filter((f) => f instanceof CreateRefused).length,
    errors: failures.filter((f) => !(f instanceof CreateRefused)).length,
    details: [...new Set(failures.map((f) => f.message))].slice(0, 10),
  };
}
