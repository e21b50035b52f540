import type { VideoFailureCode, VideoSeconds, VideoSize } from '@oc/contracts';
import { GenerateVideosOperation, GoogleGenAI } from '@google/genai';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { GeneratedVideo, GenerationJob, StartedGeneration, UpstreamFailure, UpstreamStatus, VideoProvider } from '../application/ports';

export interface GeminiVeoVideoOptions {
  apiKey: string;
  /** Replaces the Gemini API's origin (GEMINI_BASE_URL); the SDK's own default applies when absent. */
  baseUrl?: string;
  /** The upstream Veo model id, e.g. `veo-3.1-fast-generate-preview`. */
  model: string;
  pollIntervalMs: number;
  /** Bounds every HTTP call, so a hung provider becomes a retried step, not a stuck job. */
  requestTimeoutMs: number;
}

const PROVIDER = 'gemini';

// Veo 3.1 makes 4, 6 or 8 second clips ("Video length: 4, 6, or 8 seconds",
// https://cloud.google.com/vertex-ai/generative-ai/docs/models/veo/3-1-generate; the Gemini API guide's table was
// only seen through third-party copies saying the same): of our lengths 4 and 8, never 12. Both aspect ratios
// come in 720p and 1080p since 2026-01-13 (https://ai.google.dev/gemini-api/docs/changelog: "more support for
// portrait videos in all resolutions").
const VEO_31_SECONDS = ['4', '8'] as const;
const VEO_31_SIZES = ['1280x720', '720x1280', '1792x1024', '1024x1792'] as const;

/**
 * The Gemini API serves Veo 3.1 under preview ids only: the GA `-001` ids are Gemini Enterprise Agent Platform
 * models (https://ai.google.dev/gemini-api/docs/changelog, 2026-06-15). A third-party notice
 * (https://docs.apiyi.com/en/live/2026-10/veo-3-1-preview-retired) reports these preview ids shut down on
 * 2026-10-22; Google's own deprecations page could not be read to confirm it.
 */
export const GEMINI_VEO_VIDEO_DEFAULTS = {
  'video-2': {
    model: 'veo-3.1-fast-generate-preview',
    seconds: VEO_31_SECONDS,
    sizes: VEO_31_SIZES,
    // UNCONFIRMED: $0.15/s (720p and 1080p, audio included) by third-party copies of
    // https://ai.google.dev/gemini-api/docs/pricing from early 2026; others report a cut in April 2026. The
    // higher figure is kept until the official page is read.
    cost_per_second_usd: 0.15,
  },
  'video-2-pro': {
    model: 'veo-3.1-generate-preview',
    seconds: VEO_31_SECONDS,
    sizes: VEO_31_SIZES,
    // "Veo 3.1 Standard, video with audio: $0.40 (720p and 1080p)" per second,
    // https://ai.google.dev/gemini-api/docs/pricing as transcribed on 2026-10-07.
    cost_per_second_usd: 0.4,
  },
} as const;

const CAPABILITIES: Record<string, { seconds: readonly string[]; sizes: readonly string[] }> = Object.fromEntries(
  Object.values(GEMINI_VEO_VIDEO_DEFAULTS).map((d) => [d.model, { seconds: d.seconds, sizes: d.sizes }]),
);

/** What an upstream Veo model can make, of our lengths and sizes; undefined for a model not known here. */
export function geminiVeoVideoCapabilities(model: string): { seconds: string[]; sizes: string[] } | undefined {
  const capabilities = CAPABILITIES[model];
  return capabilities && { seconds: [...capabilities.seconds], sizes: [...capabilities.sizes] };
}

const SHAPES: Record<VideoSize, { aspectRatio: '16:9' | '9:16'; resolution: '720p' | '1080p' }> = {
  '1280x720': { aspectRatio: '16:9', resolution: '720p' },
  '720x1280': { aspectRatio: '9:16', resolution: '720p' },
  '1792x1024': { aspectRatio: '16:9', resolution: '1080p' },
  '1024x1792': { aspectRatio: '9:16', resolution: '1080p' },
};

// Veo 3.1 makes 1080p only at 8 s, per third-party copies of the Veo parameter table (e.g.
// docs.modellix.ai/google/veo-3-1-fast-t2v); not confirmed on Google's page.
const SECONDS_AT_1080P: VideoSeconds = '8';

/** Whether a known Veo model makes this length at this size (its lists, and 1080p only at 8 s); true for others. */
export function geminiVeoAccepts(model: string, seconds: VideoSeconds, size: VideoSize): boolean {
  if (!CAPABILITIES[model]) return true;
  return SHAPES[size].resolution !== '1080p' || seconds === SECONDS_AT_1080P;
}

// Google's answers to a refused prompt name Responsible AI or safety; there is no machine-readable reason.
const POLICY_TEXT = /responsible ai|safety|polic(y|ies)|prohibited|sensitive|violat/i;
/** google.rpc.Code DEADLINE_EXCEEDED, as an operation's `error.code`. */
const DEADLINE_EXCEEDED = 4;
// Google reports no progress. Its Veo guide once gave 11 s to 6 min per clip (not re-read for 2026-11); the
// estimate approaches 99 over about this long and never reaches 100.
const TYPICAL_GENERATION_MS = 90_000;

const FAILURE_MESSAGES = {
  content_policy_violation: 'The video was blocked by the content safety filters. Try a different prompt.',
  generation_failed: 'The video could not be generated.',
  timeout: 'Video generation took too long and was stopped.',
} satisfies Partial<Record<VideoFailureCode, string>>;

type AdapterFailureCode = keyof typeof FAILURE_MESSAGES;

function failed(code: AdapterFailureCode): UpstreamFailure {
  return { status: 'failed', code, message: FAILURE_MESSAGES[code] };
}

interface GoogleErrorBody {
  error?: { code?: number; message?: string; status?: string; details?: { '@type'?: string; reason?: string; retryDelay?: string }[] };
}

/** A non-2xx answer, thrown from inside the SDK's fetch where its status, headers and body are still at hand. */
class GoogleHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: GoogleErrorBody,
    readonly headers: Headers,
  ) {
    super(`Google answered ${status}`);
    this.name = 'GoogleHttpError';
  }

  get reasons(): string[] {
    return (this.body.error?.details ?? []).flatMap((d) => (d.reason ? [d.reason] : []));
  }

  /** google.rpc.RetryInfo (`"retryDelay": "17s"`), which Google's 429s carry in place of a Retry-After header. */
  get retryDelayMs(): number | undefined {
    const delay = this.body.error?.details?.find((d) => d['@type']?.endsWith('google.rpc.RetryInfo'))?.retryDelay;
    const seconds = delay?.endsWith('s') ? Number(delay.slice(0, -1)) : NaN;
    return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
  }
}

async function readErrorBody(res: Response): Promise<GoogleErrorBody> {
  const text = await res.text();
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === 'object' && body !== null) return body as GoogleErrorBody;
  } catch {
    // Not JSON (a proxy's HTML page, say): its text is the message.
  }
  return { error: { message: text.slice(0, 500) } };
}

/** The SDK's fetch: an error status leaves as a GoogleHttpError, which the SDK passes on unchanged. */
async function fetchOrThrow(...args: Parameters<typeof fetch>): Promise<Response> {
  const res = await fetch(...args);
  if (!res.ok) throw new GoogleHttpError(res.status, await readErrorBody(res), res.headers);
  return res;
}

/**
 * The official client, reaching its transport for the two calls @google/genai 3.3.0 no longer makes against the
 * Gemini API: its `models.generateVideos` and the converters behind it are Agent Platform only since 3.x, while
 * `operations.getVideosOperation` still reads Gemini API operations. The requests are the ones the SDK made up to
 * 2.18 (`models/{model}:predictLongRunning`, `files/{id}:download?alt=media`), sent with the SDK's key header,
 * base URL and timeout. `apiClient` is protected and marked internal, which is why the SDK version is pinned.
 */
class VeoClient extends GoogleGenAI {
  async post(path: string, body: unknown): Promise<unknown> {
    const res = await this.apiClient.request({ path, httpMethod: 'POST', body: JSON.stringify(body) });
    return res.json();
  }

  async bytes(path: string, queryParams: Record<string, string>): Promise<Buffer> {
    const res = await this.apiClient.request({ path, httpMethod: 'GET', queryParams });
    return Buffer.from(await res.responseInternal.arrayBuffer());
  }
}

function unreadable(what: string): ProviderError {
  return new ProviderError({ kind: 'retryable', message: `${PROVIDER} sent an unreadable answer.`, detail: `${PROVIDER}: ${what}` });
}

/** The SDK aborts an attempt that outlives `httpOptions.timeout`; nothing else here aborts. */
function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

/** Google Veo through the Gemini API: a long-running `predictLongRunning` operation, polled by its name. */
export class GeminiVeoProvider implements VideoProvider {
  readonly name = PROVIDER;
  private readonly client: VeoClient;
  /** Undefined for a model not known here: the operator's catalog vouches for what it can make, Google has the last word. */
  private readonly capabilities: { seconds: string[]; sizes: string[] } | undefined;

  constructor(private readonly options: GeminiVeoVideoOptions) {
    this.capabilities = geminiVeoVideoCapabilities(options.model);
    this.client = new VeoClient({
      // Explicit, so that GOOGLE_GENAI_USE_VERTEXAI in the environment cannot move us to another product.
      vertexai: false,
      apiKey: options.apiKey,
      // The SDK's Gemini API default became v1; Veo's operations are documented under v1beta.
      apiVersion: 'v1beta',
      // No retryOptions: the SDK then makes one attempt per call, and our router does the failing over.
      httpOptions: {
        ...(options.baseUrl ? { baseUrl: options.baseUrl } : {}),
        timeout: options.requestTimeoutMs,
        fetch: fetchOrThrow,
      },
    });
  }

  nextPollAt(_job: GenerationJob, _started: StartedGeneration, now: number): number {
    return now + this.options.pollIntervalMs;
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure> {
    const body = this.requestBody(job);
    let answer: unknown;
    try {
      answer = await this.client.post(`models/${this.options.model}:predictLongRunning`, body);
    } catch (error) {
      if (error instanceof GoogleHttpError && error.status === 400 && POLICY_TEXT.test(error.body.error?.message ?? '')) {
        return failed('content_policy_violation');
      }
      throw this.providerError(error, now);
    }
    const name = (answer as { name?: unknown } | null)?.name;
    if (typeof name !== 'string' || name === '') throw unreadable('submission answer without an operation name');
    return { upstreamId: name, startedAt: now };
  }

  async poll(_job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus> {
    const operation = await this.operation(started.upstreamId, now);
    if (!operation.done) return { status: 'in_progress', progress: estimatedProgress(now - started.startedAt) };
    if (operation.error) return failed(operationFailure(operation.error));
    if (videoUri(operation)) return { status: 'completed' };
    return failed((operation.response?.raiMediaFilteredCount ?? 0) > 0 ? 'content_policy_violation' : 'generation_failed');
  }

  async download(_job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    // No clock is injected here; it only dates a Retry-After given as an HTTP date.
    const now = Date.now();
    const uri = videoUri(await this.operation(started.upstreamId, now));
    // The SDK's own download keeps only the file id from the URI and asks the configured base URL for it, so
    // the key goes nowhere else (tFileName and downloadFile in @google/genai).
    const fileId = uri && /\/files\/([a-z0-9]+)/.exec(uri)?.[1];
    if (!fileId) throw unreadable('finished operation without a downloadable video URI');
    try {
      return { kind: 'bytes', video: await this.client.bytes(`files/${fileId}:download`, { alt: 'media' }) };
    } catch (error) {
      throw this.providerError(error, now);
    }
  }

  /** The request Veo documents: `instances[0].prompt`, the rest in `parameters`; audio is always generated. */
  private requestBody(job: GenerationJob) {
    const { aspectRatio, resolution } = SHAPES[job.size];
    if (this.capabilities) {
      // Every known model makes all four sizes; a size is refused only with a length, below.
      if (!this.capabilities.seconds.includes(job.seconds)) throw this.unsupported(`seconds '${job.seconds}'`);
      if (resolution === '1080p' && job.seconds !== SECONDS_AT_1080P) {
        throw this.unsupported(`seconds '${job.seconds}' at size '${job.size}' (1080p needs '${SECONDS_AT_1080P}')`);
      }
    }
    // personGeneration is left to Google's default: the guide listed a single accepted value for text-to-video
    // (not re-confirmed for 2026-11), so naming one could only add a way to be refused.
    return {
      instances: [{ prompt: job.prompt }],
      parameters: { aspectRatio, resolution, durationSeconds: Number(job.seconds), sampleCount: 1 },
    };
  }

  private unsupported(what: string): ProviderError {
    return new ProviderError({ kind: 'request', message: `${PROVIDER} model ${this.options.model} does not support ${what}.` });
  }

  private async operation(upstreamId: string, now: number): Promise<GenerateVideosOperation> {
    // A bare operation carrying only the name is all getVideosOperation reads, so a restart loses nothing.
    const operation = Object.assign(new GenerateVideosOperation(), { name: upstreamId });
    let answer: GenerateVideosOperation;
    try {
      answer = await this.client.operations.getVideosOperation({ operation });
    } catch (error) {
      throw this.providerError(error, now);
    }
    if (answer.name !== upstreamId) throw unreadable('operation answer without its name');
    return answer;
  }

  private providerError(error: unknown, now: number): ProviderError {
    if (error instanceof GoogleHttpError) return this.httpError(error, now);
    if (error instanceof SyntaxError) return unreadable(`not JSON: ${error.message}`);
    return providerUnreachable(PROVIDER, error, isAbort(error));
  }

  private httpError(error: GoogleHttpError, now: number): ProviderError {
    // Only status and message: Google's DebugInfo detail can quote the key it was sent.
    const detail = `${error.body.error?.status ?? ''} ${error.body.error?.message ?? ''}`.trim();
    // A wrong key is a 400 INVALID_ARGUMENT on the Gemini API, told apart only by its ErrorInfo reason.
    if (error.status === 400 && error.reasons.includes('API_KEY_INVALID')) {
      return new ProviderError({ kind: 'deployment', status: 400, message: `${PROVIDER} answered 400.`, detail: `${PROVIDER} answered 400: ${detail}` });
    }
    const wait = retryAfterMs((name) => error.headers.get(name), now) ?? error.retryDelayMs;
    return providerHttpError(PROVIDER, error.status, detail, wait);
  }
}

function videoUri(operation: GenerateVideosOperation): string | undefined {
  return operation.done ? operation.response?.generatedVideos?.[0]?.video?.uri : undefined;
}

function operationFailure(error: Record<string, unknown>): AdapterFailureCode {
  if (typeof error.message === 'string' && POLICY_TEXT.test(error.message)) return 'content_policy_violation';
  return error.code === DEADLINE_EXCEEDED ? 'timeout' : 'generation_failed';
}

/** Google reports no progress for Veo, so it is estimated from the time elapsed: 1 at once, below 100 forever. */
function estimatedProgress(elapsedMs: number): number {
  const elapsed = Math.max(0, elapsedMs);
  return 1 + Math.floor((98 * elapsed) / (elapsed + TYPICAL_GENERATION_MS));
}
