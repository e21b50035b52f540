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
  /**
   * `http://127.0.0.1:<port>`, one per process that listens (two Portkey processes, two gateways with
   * `REPLICAS=2`): the connections are spread over them in turn.
   */
  origins: string[];
  connections: number;
  durationSeconds: number;
  requests: RequestShape[];
}

/**
 * Streamed chat completions read by hand: time to the first `data:` line, to the first chunk with content, and
 * every chunk counted.
 */
export interface StreamLoadJob extends Omit<HttpLoadJob, 'kind'> {
  kind: 'stream';
}

/**
 * One request at a time, taking the contenders in turn (the order rotating every turn), so that each is
 * measured under the same conditions as the others, request by request: what a path adds on its own.
 */
export interface OneAtATimeJob {
  kind: 'one-at-a-time';
  /** Plain chat is timed to its whole answer; a stream to its first content token. */
  stream: boolean;
  durationSeconds: number;
  contenders: { name: string; origins: string[]; requests: RequestShape[] }[];
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

export type LoadJob = HttpLoadJob | StreamLoadJob | OneAtATimeJob | ReceiverJob | VideoJob;

/** What every measurement reports about failures; any of them makes its row invalid. */
export interface Failures {
  non2xx: number;
  errors: number;
  /** Status codes and error messages, for the loud report. */
  details: string[];
}

/** Rates and latencies count 2xx answers only: a fast refusal is not a fast answer. */
export interface HttpLoadResult extends Failures {
  /** Every answer, 2xx or not. */
  requests: number;
  /** 2xx answers. */
  ok: number;
  seconds: number;
  /** 2xx answers per second. */
  rps: number;
  p50: number;
  p99: number;
  /**
   * CPU time (user + system) of every process of the target, over the run and the quiet after it, per 2xx
   * answer, in ms; set by the bench where it measures it (measure.ts), never by the load process.
   */
  cpuMsPerRequest?: number;
  /**
   * The same of the servers it uses but does not start (`start:distributed`'s NATS server and Redis, which
   * whatever else runs on the host may use too), counted apart.
   */
  serversCpuMsPerRequest?: number;
}

export interface StreamLoadResult extends HttpLoadResult {
  /** Time to first `data:` line. */
  ttfbP50: number;
  ttfbP99: number;
  /**
   * Time to the first chunk carrying content (a non-empty `choices[].delta.content`): a role-only first chunk,
   * sent before the upstream answered, says nothing of when the answer starts.
   */
  ttftP50: number;
  ttftP99: number;
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

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
}

/** One contender of a one-at-a-time job. */
export interface OneAtATimeFigures extends Failures {
  /** 2xx answers timed. */
  ok: number;
  /** Plain: to the end of the answer; stream: to the first content token. */
  latency: Percentiles;
  /** Streams only: to the first `data:` line. */
  ttfb?: Percentiles;
}

export type OneAtATimeResult = Record<string, OneAtATimeFigures>;

export type LoadResult<J extends LoadJob> = J extends HttpLoadJob
  ? HttpLoadResult
  : J extends StreamLoadJob
    ? StreamLoadResult
    : J extends OneAtATimeJob
      ? OneAtATimeResult
      : J extends ReceiverJob
        ? { port: number }
        : VideoResult;
