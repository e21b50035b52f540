import type { Reply, VideoFailureCode, VideoModel, VideoSeconds, VideoSize } from '@oc/contracts';

/** What an upstream is asked to generate, and how it knows the job again after a restart. */
export interface GenerationJob {
  videoId: string;
  model: VideoModel;
  prompt: string;
  seconds: VideoSeconds;
  size: VideoSize;
}

export interface StartedGeneration {
  upstreamId: string;
  startedAt: number;
}

export interface UpstreamFailure {
  status: 'failed';
  code: VideoFailureCode;
  message: string;
}

export type UpstreamStatus = { status: 'in_progress'; progress: number } | { status: 'completed' } | UpstreamFailure;

/** An upstream video generator: the simulator, or an OpenAI-compatible Videos API. */
export interface VideoProvider {
  readonly name: string;
  /** How often a running job is polled. */
  readonly pollIntervalMs: number;
  /** A refusal the upstream gives at once (policy, quota) fails the job; an outage throws and is retried. */
  start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure>;
  poll(job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus>;
  /** The finished MP4. */
  download(job: GenerationJob, started: StartedGeneration): Promise<Buffer>;
}

/** A place files live: the temporary (upstream) area or permanent object storage. */
export interface FileStore {
  put(key: string, bytes: Buffer): Promise<void>;
  /** Byte size, or null when there is no such file. */
  size(key: string): Promise<number | null>;
  read(key: string, offset: number, length: number): Promise<Buffer>;
  remove(key: string): Promise<void>;
}

/** Runs a task once its time (by the injected clock) has come; one pending task per key. */
export interface Scheduler {
  schedule(key: string, atMs: number, task: () => Promise<void>): void;
  cancel(key: string): void;
  close(): Promise<void>;
}

/** Billing's reservation subjects, as replies so that a 402 reaches the client unchanged. */
export interface Billing {
  reserve(orgId: string, videoId: string, amountMicros: number, description: string): Promise<Reply<unknown>>;
  capture(orgId: string, videoId: string, amountMicros: number): Promise<Reply<unknown>>;
  release(orgId: string, videoId: string): Promise<Reply<unknown>>;
}

/** Renders a playable MP4 and derives a still from one. */
export interface Renderer {
  clip(size: VideoSize, seconds: VideoSeconds): Promise<Buffer>;
  thumbnail(mp4: Buffer): Promise<Buffer>;
}
