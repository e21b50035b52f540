/**
 * What the bench asks of its load process and what comes back, over the child's IPC channel. Everything
 * here is plain data: a request to rotate through is spelled out, never a function, so it crosses processes.
 */

/** One request shape; a load job sends them in turn, one per request (e.g. one per organization's key). */
export interface RequestShape {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface HttpLoadJob {
  kind: 'http';
  /** `http://127.0.0.1:<port>` */
  origin: string;
  connections: number;
  durationSeconds: number;
  requests: RequestShape[];
}

/** Streamed chat completions read by hand: time to the first `data:` line, and every chunk counted. */
export interface StreamLoadJob extends Omit<HttpLoadJob, 'kind'> {
  kind: 'stream';
}

export interface ReceiverJob {
  kind: 'receiver';
}

/** Creates videos and waits for each one's `video.completed` at the receiver path its webhooks post to. */
export interface VideoJob {
  kind: 'videos';
  origin: string;
  key: string;
  /** Receiver paths registered for the organization's webhooks; each video is awaited at every one. */
  paths: string[];
  count: number;
  /** `sequential`: one job after the other; `burst`: every create at once. */
  mode: 'sequential' | 'burst';
  timeoutMs: number;
}

export type LoadJob = HttpLoadJob | StreamLoadJob | ReceiverJob | VideoJob;

/** What every measurement reports about failures; any of them makes its row invalid. */
export interface Failures {
  non2xx: number;
  errors: number;
  /** Status codes and error messages, for the loud report. */
  details: string[];
}

export interface HttpLoadResult extends Failures {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
}

export interface StreamLoadResult extends HttpLoadResult {
  /** Time to first `data:` line. */
  ttfbP50: number;
  ttfbP99: number;
  /** Chunks (`data:` lines other than `[DONE]`) read per second across all connections. */
  chunksPerSecond: number;
}

export interface VideoResult extends Failures {
  count: number;
  /** Create request sent → `video.completed` received, per video (the latest of its paths). */
  p50: number;
  p99: number;
  /** From the first create to the last webhook. */
  seconds: number;
  jobsPerSecond: number;
  /** From the first create to the last create response (burst mode's "all accepted"). */
  createsSeconds: number;
  /** Webhook deliveries counted at the receiver, per second from the first to the last arrival. */
  deliveries: number;
  deliveriesPerSecond: number;
}

export type LoadResult<J extends LoadJob> = J extends HttpLoadJob
  ? HttpLoadResult
  : J extends StreamLoadJob
    ? StreamLoadResult
    : J extends ReceiverJob
      ? { port: number }
      : VideoResult;
