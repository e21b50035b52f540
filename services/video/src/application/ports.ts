import type { DeploymentStatus, Reply, ServedUsage, VideoFailureCode, VideoModel, VideoReferenceType, VideoSeconds, VideoSize } from '@oc/contracts';

/** The image a video starts from (image-to-video), its type told by its bytes. */
export interface ReferenceImage {
  data: Buffer;
  contentType: VideoReferenceType;
}

/** What an upstream is asked to generate, and how it knows the job again after a restart. */
export interface GenerationJob {
  videoId: string;
  model: VideoModel;
  prompt: string;
  seconds: VideoSeconds;
  size: VideoSize;
  /** Given to `start` only (the provider has it from then on): the image to start from, when there is one. */
  image?: ReferenceImage | undefined;
}

/** A job's parameters that decide which deployments can take it. */
export type JobShape = Pick<GenerationJob, 'model' | 'seconds' | 'size'> & { imageType?: VideoReferenceType | undefined };

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

/**
 * A finished video: the MP4's bytes as an upstream sent them (the job makes the thumbnail), or files the
 * provider already has on local disk, its MP4 and WebP still, which are never modified once written.
 */
export type GeneratedVideo = { kind: 'bytes'; video: Buffer } | ({ kind: 'files' } & RenderedClip);

/** An upstream video generator: the simulator, or an OpenAI-compatible Videos API. */
export interface VideoProvider {
  readonly name: string;
  /** A refusal the upstream gives at once (policy, quota) fails the job; an outage throws and is retried. */
  start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure>;
  /**
   * When a running job is next worth polling, after a poll (or the start) at `now`: a time not after `now`
   * means at once, in the same step.
   */
  nextPollAt(job: GenerationJob, started: StartedGeneration, now: number): number;
  poll(job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus>;
  /** The finished video. */
  download(job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo>;
}

/** The deployment that serves a job, as the job remembers it across restarts. */
export interface ServingDeployment {
  id: string;
  provider: string;
  upstreamModel: string;
  adapter: VideoProvider;
  /** What a second of video at this size costs us, integer micro-USD. */
  costMicrosPerSecond(size: VideoSize): number;
}

/** Each public video model's deployments, chosen per job and failed over at submission. */
export interface VideoRouting {
  /** The parameter of a request that no deployment of its model can serve (`seconds`, `size`, its image). */
  unsupported(job: JobShape): 'seconds' | 'size' | 'input_reference' | undefined;
  /**
   * Submits the job to one deployment that can serve it, failing over to the next on an outage; a refusal of the
   * job itself (its prompt) is the answer. Throws when every deployment failed or none may take it now.
   */
  start(job: GenerationJob, now: number): Promise<(StartedGeneration & { deployment: string }) | UpstreamFailure>;
  /** A deployment by the id a job recorded; undefined once the catalog no longer has it. */
  deployment(model: VideoModel, id: string): ServingDeployment | undefined;
  /**
   * How often a job of the model is polled at its provider: at the deployment it was submitted to, or before
   * that (or once the catalog lost it) the soonest any of the model's deployments would.
   */
  pollIntervalMs(model: VideoModel, deployment: string | null): number | undefined;
  statuses(): DeploymentStatus[];
}

/** A place files live: the temporary (upstream) area or permanent object storage. */
export interface FileStore {
  put(key: string, bytes: Buffer): Promise<void>;
  /**
   * Stores the content of a local file that is never modified afterwards; a local store links it rather
   * than copying it where the file system allows.
   */
  putFile(key: string, path: string): Promise<void>;
  /** Byte size, or null when there is no such file. */
  size(key: string): Promise<number | null>;
  read(key: string, offset: number, length: number): Promise<Buffer>;
  remove(key: string): Promise<void>;
}

/** Time-limited download URLs of stored objects that need no key of ours (S3's presigned URLs). */
export interface UrlSigner {
  signedUrl(key: string, expiresInSeconds: number, nowMs: number): Promise<string>;
}

/** Runs a task once its time (by the injected clock) has come; one pending task per key. */
export interface Scheduler {
  schedule(key: string, atMs: number, task: () => Promise<void>): void;
  cancel(key: string): void;
  close(): Promise<void>;
}

/** Billing's reservation subjects, as replies so that a 402 reaches the client unchanged. */
export interface Billing {
  /** `expiresAt` (unix seconds): billing releases the reservation itself if it is still open then. */
  /** `keyId`: the API key asking, whose budget billing checks (402 key_budget_exceeded). */
  reserve(orgId: string, videoId: string, amountMicros: number, description: string, expiresAt: number, keyId?: string): Promise<Reply<unknown>>;
  /** `usage`: the deployment that generated the video and what it cost us, recorded beside the charge. */
  capture(orgId: string, videoId: string, amountMicros: number, usage?: ServedUsage): Promise<Reply<unknown>>;
  release(orgId: string, videoId: string): Promise<Reply<unknown>>;
}

/** A rendered clip on local disk: both files are complete and never modified once they exist. */
export interface RenderedClip {
  /** Path of the MP4. */
  video: string;
  /** Path of the WebP still of its first frame. */
  thumbnail: string;
  /** Size of the MP4 in bytes. */
  bytes: number;
}

/** Renders a playable MP4 (with its still) and derives a still from any MP4. */
export interface Renderer {
  /** The clip of this size and length; each is rendered once and kept. */
  clip(size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip>;
  /** A clip of an image (an input_reference), kept under the image's SHA-256 digest. */
  imageClip(image: Buffer, size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip>;
  /** The image clip rendered earlier from the image of this digest; null when it is not on disk. */
  renderedImageClip(digest: string, size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip | null>;
  /** A WebP still of the first frame of an MP4 (an upstream's video). */
  thumbnail(mp4: Buffer): Promise<Buffer>;
  /** The clip's files turned out to be missing from disk: the next `clip` looks (and renders) again. */
  forget(size: VideoSize, seconds: VideoSeconds): void;
}
