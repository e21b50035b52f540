import type { VideoFailureCode, VideoSeconds, VideoSize } from '@oc/contracts';
import { GenerateVideosOperation, GoogleGenAI } from '@google/genai';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { GeneratedVideo, GenerationJob, StartedGeneration, UpstreamFailure, UpstreamStatus, VideoProvider } from '../application/ports';
import { CAPABILITIES, geminiVeoVideoCapabilities, SECONDS_AT_1080P, SHAPES } from './gemini-veo-models';

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

  /**
   * The request Veo documents: `instances[0].prompt`, and the image to start from inline as `instances[0].image`
   * (`bytesBase64Encoded`, `mimeType`), the rest in `parameters`; audio is always generated.
   */
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
    const image = job.image && { bytesBase64Encoded: job.image.data.toString('base64'), mimeType: job.image.contentType };
    return {
      instances: [{ prompt: job.prompt, ...(image ? { image } : {}) }],
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
