import type { VideoFailureCode, VideoSeconds, VideoSize } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import Replicate, { parseProgressFromLogs } from 'replicate';
import { z } from 'zod';
import type { GeneratedVideo, GenerationJob, StartedGeneration, UpstreamFailure, UpstreamStatus, VideoProvider } from '../application/ports';
import { FIRST_FRAME, type ModelSpec, SHAPES, specOf } from './replicate-models';

export interface ReplicateVideoOptions {
  /** `REPLICATE_API_TOKEN`. */
  apiKey: string;
  /** `REPLICATE_BASE_URL`, ending in `/v1` as the SDK's `baseUrl` means it; unset, the SDK's own default applies. */
  baseUrl?: string;
  /** The official model, `owner/name`, e.g. `REPLICATE_VIDEO_DEFAULTS['video-2'].model`. */
  model: string;
  pollIntervalMs: number;
  /** Bounds every HTTP call (the MP4 download included), so a hung provider becomes a retried step, not a stuck job. */
  requestTimeoutMs: number;
}

const PROVIDER = 'replicate';


function modelInput(spec: ModelSpec, job: GenerationJob): Record<string, unknown> {
  const { aspectRatio, tier } = SHAPES[job.size];
  const duration = Number(job.seconds);
  switch (spec.family) {
    case 'seedance-2':
      return { prompt: job.prompt, duration, resolution: tier, aspect_ratio: aspectRatio };
    case 'kling-v3':
      return { prompt: job.prompt, duration, mode: tier === '1080p' ? 'pro' : 'standard', aspect_ratio: aspectRatio };
  }
}

function cannotMake(message: string): ProviderError {
  return new ProviderError({ kind: 'request', message });
}

/** The model's input for this job, or a request error naming what the model cannot do, before anything is sent. */
function inputFor(model: string, job: GenerationJob): Record<string, unknown> {
  const spec = specOf(model);
  if (!spec) throw cannotMake(`The replicate model ${model} is not one this adapter can drive.`);
  if (!(spec.seconds as readonly string[]).includes(job.seconds)) {
    throw cannotMake(`seconds: ${model} cannot make a ${job.seconds}-second video.`);
  }
  if (!(spec.sizes as readonly string[]).includes(job.size)) throw cannotMake(`size: ${model} cannot make ${job.size} videos.`);
  if (!job.image) return modelInput(spec, job);
  const frame = FIRST_FRAME[spec.family];
  if (!(frame.types as readonly string[]).includes(job.image.contentType)) throw cannotMake(`input_reference: ${model} takes no ${job.image.contentType} image.`);
  // A data URL, which Replicate takes in place of a file's URL: no upload to its files API is made.
  return { ...modelInput(spec, job), [frame.input]: `data:${job.image.contentType};base64,${job.image.data.toString('base64')}` };
}

/** The part of Replicate's prediction object we rely on (https://replicate.com/docs/reference/http#predictions.get). */
const PredictionSchema = z.object({
  id: z.string().min(1),
  // `aborted` is documented in https://replicate.com/docs/topics/predictions/lifecycle and in the SDK's types.
  status: z.enum(['starting', 'processing', 'succeeded', 'failed', 'canceled', 'aborted']),
  output: z.union([z.string(), z.array(z.unknown())]).nullish(),
  error: z.unknown(),
  logs: z.string().nullish(),
});
type Prediction = z.infer<typeof PredictionSchema>;

/**
 * Replicate's `error` is free text. E005 / "flagged as sensitive" is Seedance's content filter (as other
 * integrators found; the documented codes at https://replicate.com/docs/reference/error-codes start at E1000).
 */
const POLICY = /nsfw|safety|flagged|sensitive|E005|content.?policy|moderat/i;
/** E6716 is "Timeout Starting Prediction" (https://replicate.com/docs/reference/error-codes). */
const TIMED_OUT = /E6716|timed? ?out/i;

/** No Replicate answer means the customer's quota: our own account's 402 is a deployment error instead. */
type ReplicateFailureCode = Exclude<VideoFailureCode, 'insufficient_quota'>;

const MESSAGES: Record<ReplicateFailureCode, string> = {
  content_policy_violation: 'The request was rejected by the safety system.',
  generation_failed: 'The video could not be generated.',
  timeout: 'The video took too long to generate.',
};

function failure(code: ReplicateFailureCode): UpstreamFailure {
  return { status: 'failed', code, message: MESSAGES[code] };
}

function failureOf(prediction: Prediction): UpstreamFailure {
  if (prediction.status === 'aborted') return failure('timeout'); // its deadline passed before it started
  if (prediction.status === 'canceled') return failure('generation_failed'); // we never cancel, so someone else did
  const text = typeof prediction.error === 'string' ? prediction.error : JSON.stringify(prediction.error ?? '');
  if (POLICY.test(text)) return failure('content_policy_violation');
  return failure(TIMED_OUT.test(text) ? 'timeout' : 'generation_failed');
}

/** The first http(s) URL of the output: a video model's output is one URL, or a list of them. */
function videoUrlOf(prediction: Prediction): string | undefined {
  const candidates = Array.isArray(prediction.output) ? prediction.output : [prediction.output];
  return candidates.find((value): value is string => typeof value === 'string' && /^https?:\/\//.test(value));
}

/**
 * Video models rarely log a tqdm percentage; when none is there, elapsed time against a typical run (an
 * estimate: third parties report about 1-4 minutes for these models) approaches 99 and never reaches it.
 */
const TYPICAL_GENERATION_MS = 180_000;

function progressOf(prediction: Prediction, elapsedMs: number): number {
  const logged = parseProgressFromLogs(prediction.logs ?? '')?.percentage;
  const fraction = logged ?? 1 - Math.exp(-Math.max(0, elapsedMs) / TYPICAL_GENERATION_MS);
  return Math.min(99, Math.max(1, Math.floor(fraction * 99)));
}

/** A policy refusal at submission ends the job; any other 400/422 stays a thrown request error. */
function isPolicyRefusal(error: unknown): boolean {
  return error instanceof ProviderError && (error.status === 400 || error.status === 422) && POLICY.test(error.detail);
}

function unreadable(cause: unknown): ProviderError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new ProviderError({
    kind: 'retryable',
    message: `${PROVIDER} sent an answer that could not be read.`,
    detail: `${PROVIDER} unreadable answer: ${reason.slice(0, 500)}`,
  });
}

function httpError(response: Response, body: string, now: number): ProviderError {
  // 402 is our own account's credit running out, not the customer's quota: another deployment can serve
  // the job, so it is this deployment that is unusable until someone tops it up.
  if (response.status === 402) {
    return new ProviderError({ kind: 'deployment', status: 402, message: `${PROVIDER} answered 402.`, detail: `${PROVIDER} answered 402: ${body.slice(0, 500)}` });
  }
  const wait = retryAfterMs((name) => response.headers.get(name), now);
  return providerHttpError(PROVIDER, response.status, body, wait);
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * The SDK (1.4.0) has no switch for its retries: `withAutomaticRetries` repeats a GET on 429/5xx, any method
 * on 429, and any request whose fetch throws (a POST included), up to 5 more times. Our router fails over
 * instead, so each SDK call gets a fetch that makes one real attempt and answers every repeat with that
 * attempt's outcome. `predictions.create` and `predictions.get` each make one request (no file inputs here).
 */
function singleAttemptFetch(timeoutMs: number, now: number): Fetch {
  let outcome: Promise<Response> | undefined;
  return (input, init) => (outcome ??= attempt(input, init, timeoutMs, now));
}

async function attempt(input: string | URL | Request, init: RequestInit | undefined, timeoutMs: number, now: number): Promise<Response> {
  const signal = AbortSignal.timeout(timeoutMs);
  let response: Response;
  let body: string;
  try {
    response = await fetch(input, { ...init, signal });
    // Read under the same deadline, so a body that stalls cannot hold the job either.
    body = await response.text();
  } catch (error) {
    throw providerUnreachable(PROVIDER, error, signal.aborted);
  }
  if (!response.ok) throw httpError(response, body, now);
  return new Response(body, { status: response.status, headers: response.headers });
}

/** A finished MP4 is a few MB; this only stops a runaway answer from exhausting memory. */
const MAX_VIDEO_BYTES = 512 * 1024 * 1024;

async function readAtMost(response: Response, limit: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > limit) {
      throw new ProviderError({ kind: 'retryable', message: `${PROVIDER} sent a video larger than accepted.`, detail: `${PROVIDER} video over ${limit} bytes` });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Replicate predictions of an official model through the official SDK: `POST /v1/models/{owner}/{name}/predictions`,
 * then `GET /v1/predictions/{id}`, then the output URL. The prediction id is all a restarted service needs.
 */
export class ReplicateVideoProvider implements VideoProvider {
  readonly name = 'replicate';

  constructor(private readonly options: ReplicateVideoOptions) {}

  nextPollAt(_job: GenerationJob, _started: StartedGeneration, now: number): number {
    return now + this.options.pollIntervalMs;
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure> {
    const input = inputFor(this.options.model, job);
    try {
      const prediction = await this.call(now, (sdk) => sdk.predictions.create({ model: this.options.model, input }));
      return { upstreamId: prediction.id, startedAt: now };
    } catch (error) {
      if (isPolicyRefusal(error)) return failure('content_policy_violation');
      throw error;
    }
  }

  async poll(_job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus> {
    const prediction = await this.prediction(started.upstreamId, now);
    switch (prediction.status) {
      case 'starting':
      case 'processing':
        return { status: 'in_progress', progress: progressOf(prediction, now - started.startedAt) };
      case 'succeeded':
        return videoUrlOf(prediction) ? { status: 'completed' } : failure('generation_failed');
      default:
        return failureOf(prediction);
    }
  }

  async download(_job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    const prediction = await this.prediction(started.upstreamId, Date.now());
    const url = prediction.status === 'succeeded' ? videoUrlOf(prediction) : undefined;
    if (!url) {
      throw new ProviderError({
        kind: 'retryable',
        message: `${PROVIDER} has no finished video for this job.`,
        detail: `${PROVIDER} prediction ${prediction.id} is ${prediction.status} without a video URL`,
      });
    }
    return { kind: 'bytes', video: await this.fetchVideo(url) };
  }

  private prediction(upstreamId: string, now: number): Promise<Prediction> {
    return this.call(now, (sdk) => sdk.predictions.get(encodeURIComponent(upstreamId)));
  }

  /** A fresh client per call, because its fetch remembers that call's single attempt. */
  private client(now: number): Replicate {
    return new Replicate({
      auth: this.options.apiKey,
      ...(this.options.baseUrl ? { baseUrl: this.options.baseUrl } : {}),
      fetch: singleAttemptFetch(this.options.requestTimeoutMs, now),
    });
  }

  private async call(now: number, request: (sdk: Replicate) => Promise<unknown>): Promise<Prediction> {
    let answer: unknown;
    try {
      answer = await request(this.client(now));
    } catch (error) {
      // Our fetch throws ProviderError for every failed call; anything else is the SDK failing to parse.
      throw error instanceof ProviderError ? error : unreadable(error);
    }
    const parsed = PredictionSchema.safeParse(answer);
    if (!parsed.success) throw unreadable(parsed.error);
    return parsed.data;
  }

  /** Replicate's file URLs need no key: none is sent, so the key never reaches another host. */
  private async fetchVideo(url: string): Promise<Buffer> {
    const signal = AbortSignal.timeout(this.options.requestTimeoutMs);
    try {
      const response = await fetch(url, { signal });
      if (!response.ok) throw providerHttpError(PROVIDER, response.status, `video download: ${await response.text()}`);
      return await readAtMost(response, MAX_VIDEO_BYTES);
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw providerUnreachable(PROVIDER, error, signal.aborted);
    }
  }
}
