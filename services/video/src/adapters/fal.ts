import { createFalClient, type FalClient } from '@fal-ai/client';
import type { VideoFailureCode, VideoSeconds, VideoSize } from '@oc/contracts';
import { kindOfStatus, ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import { z } from 'zod';
import type {
  GeneratedVideo,
  GenerationJob,
  StartedGeneration,
  UpstreamFailure,
  UpstreamStatus,
  VideoProvider,
} from '../application/ports';
import { DURATION, ENDPOINTS, FRAMES } from './fal-models';

export interface FalVideoOptions {
  apiKey: string;
  /** Replaces the origin `https://queue.fal.run` (FAL_BASE_URL); absent, the client calls fal itself. */
  baseUrl?: string;
  /** The fal endpoint id, e.g. `fal-ai/bytedance/seedance/v1/pro/fast/text-to-video`. */
  model: string;
  pollIntervalMs: number;
  /** Bounds every HTTP call, so a hung fal becomes a retried step, not a stuck job. */
  requestTimeoutMs: number;
}


/**
 * The client builds every queue URL on this origin and has no base-URL option (`buildUrl` in its request.js), so
 * FAL_BASE_URL is applied by rewriting it in the request middleware: the only reason fal's host is named here.
 */
const QUEUE_ORIGIN = 'https://queue.fal.run';

/**
 * fal reports a queue position but no progress, so progress is elapsed time against a typical generation. The
 * typical time is our assumption, not a fal figure.
 */
const TYPICAL_GENERATION_MS = 120_000;

/** Documented error types for a generation that ran out of time (docs.fal.ai/errors, request-errors). */
const TIMEOUT_TYPES = new Set(['generation_timeout', 'request_timeout', 'startup_timeout']);

/**
 * Not `insufficient_quota`: fal refuses every call of an account out of credit with 403 "User is locked. Reason:
 * Exhausted balance" (fal-ai/fal#1147), a deployment problem to fail over from, not the customer's.
 */
type FalFailureCode = Exclude<VideoFailureCode, 'insufficient_quota'>;

const FAILURE_MESSAGES: Record<FalFailureCode, string> = {
  content_policy_violation: 'The request was flagged by a content safety check and no video was generated.',
  generation_failed: 'Video generation failed.',
  timeout: 'Video generation took too long and was stopped.',
};

const Queued = z.object({ request_id: z.string().min(1) });
// fal's queue has these three states only; a failed generation is COMPLETED too and shows in its result
// (TanStack/ai#396, verified against fal: "fal.ai never returns a FAILED queue status").
const QueueState = z.object({ status: z.enum(['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED']) });
const Output = z.object({ video: z.object({ url: z.url() }) });
/** Model errors carry `detail: [{ type, ... }]`, request errors `detail: string` and `error_type`. */
const ErrorBody = z.object({
  detail: z.union([z.string(), z.array(z.object({ type: z.string() }))]).optional(),
  error_type: z.string().optional(),
});

/** fal answered with an error status. Deliberately not the client's `ApiError`, which its retry loop matches. */
class FalHttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly headers: Headers,
  ) {
    super(`fal answered ${status}`);
    this.name = 'FalHttpFailure';
  }

  /** fal's machine-readable error types, from the body and the `X-Fal-Error-Type` header. */
  types(): string[] {
    const parsed = ErrorBody.safeParse(parseJson(this.body));
    const { detail, error_type } = parsed.success ? parsed.data : {};
    const fromDetail = Array.isArray(detail) ? detail.map((error) => error.type) : [];
    return [...fromDetail, error_type, this.headers.get('x-fal-error-type')].filter((type) => typeof type === 'string');
  }
}

/** No answer (connection refused or reset, our deadline). Carries no `cause`: the client retries on a cause's code. */
class FalNoAnswer extends Error {
  readonly timedOut: boolean;

  constructor(error: unknown) {
    super(describe(error));
    this.name = 'FalNoAnswer';
    this.timedOut = isDeadline(error);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${error.name}: ${error.message}${cause}`;
}

function isDeadline(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}

/**
 * The fetch the client is given. @fal-ai/client's queue calls retry by themselves (3 to 5 times, with backoff, on
 * 429/5xx and transport errors) and ignore `retry.maxRetries` (fal-ai/fal-js#238), but never retry an error of a
 * class they do not know. So any answer but a 2xx is thrown here as such an error, and a 2xx body is read here in
 * full, so that the client's own JSON parse cannot meet a dropped connection either: the router decides what to
 * try next, not the SDK.
 */
async function answeredOk(...[input, init]: Parameters<typeof fetch>): Promise<Response> {
  try {
    const response = await fetch(input, init);
    const body = await response.arrayBuffer();
    if (!response.ok) throw new FalHttpFailure(response.status, new TextDecoder().decode(body), response.headers);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  } catch (error) {
    throw error instanceof FalHttpFailure ? error : new FalNoAnswer(error);
  }
}

function failed(code: FalFailureCode): UpstreamFailure {
  return { status: 'failed', code, message: FAILURE_MESSAGES[code] };
}

/** A refusal of the submitted job itself; any other refusal at submission is a request-kind ProviderError. */
function refusedAtSubmission(error: unknown): UpstreamFailure | undefined {
  if (!(error instanceof FalHttpFailure) || kindOfStatus(error.status) !== 'request') return undefined;
  return error.types().includes('content_policy_violation') ? failed('content_policy_violation') : undefined;
}

/**
 * The outcome of a finished job, from the error its result answers (fal's result "returns the same error" the model
 * returned: https://fal.ai/docs/inference-api/queue/result). A 4xx other than an access or rate problem is the job's
 * own refusal; a 5xx is the job's failure only when it carries fal's typed error (the runner's, replayed after fal's
 * own retries), while an untyped one is the result call failing and worth another try.
 */
function failedJob(error: unknown): UpstreamFailure | undefined {
  if (!(error instanceof FalHttpFailure)) return undefined;
  const types = error.types();
  if (types.includes('content_policy_violation')) return failed('content_policy_violation');
  if (kindOfStatus(error.status) === 'request') return failed('generation_failed');
  if (error.status < 500 || types.length === 0) return undefined;
  return failed(types.some((type) => TIMEOUT_TYPES.has(type)) ? 'timeout' : 'generation_failed');
}

function estimatedProgress(elapsedMs: number): number {
  return Math.min(99, Math.max(1, Math.floor((99 * elapsedMs) / TYPICAL_GENERATION_MS)));
}

/**
 * fal's queue API through @fal-ai/client: submit, status, result, then the video file the result names. The
 * upstream id is fal's request id: with the endpoint id from the options it is all the client needs to build the
 * status and result URLs (`{owner}/{app}/requests/{id}`), so a new instance continues a job after a restart.
 */
export class FalVideoProvider implements VideoProvider {
  readonly name = 'fal';
  private readonly fal: FalClient;

  constructor(private readonly options: FalVideoOptions) {
    const { baseUrl } = options;
    this.fal = createFalClient({
      credentials: options.apiKey,
      fetch: answeredOk,
      requestMiddleware: async (request) =>
        baseUrl && request.url.startsWith(`${QUEUE_ORIGIN}/`)
          ? { ...request, url: `${baseUrl.replace(/\/$/, '')}${request.url.slice(QUEUE_ORIGIN.length)}` }
          : request,
    });
  }

  nextPollAt(_job: GenerationJob, _started: StartedGeneration, now: number): number {
    return now + this.options.pollIntervalMs;
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure> {
    const { endpoint, input } = this.input(job);
    try {
      const queued = Queued.parse(await this.fal.queue.submit(endpoint, { input, abortSignal: this.deadline() }));
      return { upstreamId: queued.request_id, startedAt: now };
    } catch (error) {
      const refusal = refusedAtSubmission(error);
      if (refusal) return refusal;
      throw this.failure(error, now);
    }
  }

  async poll(_job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus> {
    const state = await this.queueState(started, now);
    if (state !== 'COMPLETED') return { status: 'in_progress', progress: estimatedProgress(now - started.startedAt) };
    try {
      await this.videoUrl(started);
      return { status: 'completed' };
    } catch (error) {
      const failure = failedJob(error);
      if (failure) return failure;
      throw this.failure(error, now);
    }
  }

  async download(_job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    // The port gives download no clock; it matters only for a Retry-After given as an HTTP date.
    const now = Date.now();
    try {
      // The file lives on fal's CDN, which needs no key: the key goes to the queue API only.
      const response = await answeredOk(await this.videoUrl(started), { signal: this.deadline() });
      return { kind: 'bytes', video: Buffer.from(await response.arrayBuffer()) };
    } catch (error) {
      throw this.failure(error, now);
    }
  }

  /**
   * The endpoint and fal's input for this job, or a request-kind ProviderError before anything is sent. A job with
   * an image goes to the endpoint's image-to-video sibling, the image inline as a data URL in `image_url`.
   */
  private input(job: GenerationJob): { endpoint: string; input: Record<string, string> } {
    const { model } = this.options;
    const endpoint = ENDPOINTS.get(model);
    if (!endpoint) throw refusedRequest(`The fal endpoint ${model} is not one a job can be mapped onto.`);
    if (!endpoint.seconds.includes(job.seconds)) throw refusedRequest(`seconds ${job.seconds} is not offered by ${model}.`);
    if (!endpoint.sizes.includes(job.size)) throw refusedRequest(`size ${job.size} is not offered by ${model}.`);
    const input = { prompt: job.prompt, duration: DURATION[endpoint.family](job.seconds), ...FRAMES[job.size] };
    if (!job.image) return { endpoint: model, input };
    if (!endpoint.imageToVideo) throw refusedRequest(`${model} has no image-to-video endpoint for an input_reference.`);
    return { endpoint: endpoint.imageToVideo, input: { ...input, image_url: `data:${job.image.contentType};base64,${job.image.data.toString('base64')}` } };
  }

  private async queueState(started: StartedGeneration, now: number): Promise<z.infer<typeof QueueState>['status']> {
    try {
      const answer = await this.fal.queue.status(this.options.model, { requestId: started.upstreamId, abortSignal: this.deadline() });
      return QueueState.parse(answer).status;
    } catch (error) {
      throw this.failure(error, now);
    }
  }

  private async videoUrl(started: StartedGeneration): Promise<string> {
    const { data } = await this.fal.queue.result(this.options.model, { requestId: started.upstreamId, abortSignal: this.deadline() });
    return Output.parse(data).video.url;
  }

  private deadline(): AbortSignal {
    return AbortSignal.timeout(this.options.requestTimeoutMs);
  }

  /** Any failed call as the one error the router understands; fal's own words go to `detail` only, keyless. */
  private failure(error: unknown, now: number): ProviderError {
    if (error instanceof FalHttpFailure) {
      return providerHttpError('fal', error.status, this.withoutKey(error.body), retryAfterMs((name) => error.headers.get(name), now));
    }
    if (error instanceof FalNoAnswer) return providerUnreachable('fal', this.withoutKey(error.message), error.timedOut);
    return new ProviderError({
      kind: 'retryable',
      message: 'fal gave an answer that could not be read.',
      detail: `fal answered unreadably: ${this.withoutKey(describe(error)).slice(0, 500)}`,
    });
  }

  private withoutKey(text: string): string {
    return this.options.apiKey ? text.replaceAll(this.options.apiKey, '[key]') : text;
  }
}

function refusedRequest(message: string): ProviderError {
  return new ProviderError({ kind: 'request', message });
}
