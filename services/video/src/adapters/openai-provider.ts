import type { VideoFailureCode } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { GeneratedVideo, GenerationJob, StartedGeneration, UpstreamFailure, UpstreamStatus, VideoProvider } from '../application/ports';

export interface OpenAiProviderOptions {
  /** e.g. a reseller's `https://…/v1` (OpenAI itself shut its Videos API down on 2026-09-24). */
  baseUrl: string;
  apiKey: string;
  /** The upstream's model id (`sora-2`, `sora-2-pro` on resellers that still serve them). */
  model: string;
  /** No faster than every 5 s against the real API (its own guidance). */
  pollIntervalMs: number;
  /** Bounds every upstream call, so a hung upstream becomes a retried step, not a stuck job. */
  requestTimeoutMs?: number;
}

interface UpstreamVideo {
  id: string;
  status: 'queued' | 'in_progress' | 'completed' | 'failed';
  progress?: number | null;
  error?: { code?: string | null; message?: string | null } | null;
}

interface UpstreamErrorBody {
  error?: { code?: string | null; message?: string | null; type?: string | null };
}

/** What the customer reads: the upstream's own message may name our account with it. */
const FAILURE_MESSAGES: Record<VideoFailureCode, string> = {
  content_policy_violation: 'The provider refused the video under its content policy.',
  generation_failed: 'The provider failed to generate the video.',
  timeout: 'The provider took too long to generate the video.',
  insufficient_quota: 'The provider had no capacity left for this video.',
};

function parseBody(text: string): UpstreamErrorBody {
  try {
    return JSON.parse(text) as UpstreamErrorBody;
  } catch {
    return {};
  }
}

/** OpenAI names moderation failures in a few ways; anything else that failed is a generation failure. */
function failureCode(code: string | null | undefined): VideoFailureCode {
  if (!code) return 'generation_failed';
  if (/moderation|policy|safety|content_filter/i.test(code)) return 'content_policy_violation';
  if (/quota|billing/i.test(code)) return 'insufficient_quota';
  return 'generation_failed';
}

const NAME = 'The OpenAI-compatible video upstream';

/**
 * An OpenAI-compatible Videos API (`POST /videos`, `GET /videos/{id}`, `GET /videos/{id}/content`).
 * Create is sent as multipart/form-data, as OpenAI documents it.
 */
export class OpenAiVideoProvider implements VideoProvider {
  readonly name = 'openai';

  constructor(private readonly options: OpenAiProviderOptions) {}

  nextPollAt(_job: GenerationJob, _started: StartedGeneration, now: number): number {
    return now + this.options.pollIntervalMs;
  }

  /** Every failure is a `ProviderError`, with the upstream's own words only in its detail. */
  private async call(path: string, init: RequestInit = {}): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.options.baseUrl.replace(/\/$/, '')}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${this.options.apiKey}`, ...init.headers },
        signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
      });
    } catch (error) {
      throw providerUnreachable(NAME, error, (error as Error).name === 'TimeoutError');
    }
    if (!res.ok) {
      const body = await res.text().catch(() => '');
      throw Object.assign(providerHttpError(NAME, res.status, body, retryAfterMs((h) => res.headers.get(h), Date.now())), { body: parseBody(body) });
    }
    return res;
  }

  private async json<T>(res: Response): Promise<T> {
    try {
      return (await res.json()) as T;
    } catch (error) {
      throw new ProviderError({ kind: 'retryable', message: `${NAME} sent a malformed answer.`, detail: String(error) });
    }
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure> {
    const form = new FormData();
    form.set('model', this.options.model);
    form.set('prompt', job.prompt);
    form.set('seconds', job.seconds);
    form.set('size', job.size);
    // OpenAI's own form of an image to start from: a file part, which its SDKs send too.
    if (job.image) form.set('input_reference', new Blob([job.image.data], { type: job.image.contentType }), `input_reference.${job.image.contentType.slice('image/'.length)}`);
    try {
      const video = await this.json<UpstreamVideo>(await this.call('/videos', { method: 'POST', body: form }));
      return { upstreamId: video.id, startedAt: now };
    } catch (error) {
      // A refusal of the prompt itself fails the job; anything else is the router's to fail over.
      const code = error instanceof ProviderError && error.kind === 'request' ? (error as ProviderError & { body?: UpstreamErrorBody }).body?.error?.code : undefined;
      if (code && failureCode(code) === 'content_policy_violation') {
        return { status: 'failed', code: 'content_policy_violation', message: 'The provider refused the prompt under its content policy.' };
      }
      throw error;
    }
  }

  async poll(_job: GenerationJob, started: StartedGeneration): Promise<UpstreamStatus> {
    const video = await this.json<UpstreamVideo>(await this.call(`/videos/${encodeURIComponent(started.upstreamId)}`));
    switch (video.status) {
      case 'completed':
        return { status: 'completed' };
      case 'failed':
        return { status: 'failed', code: failureCode(video.error?.code), message: FAILURE_MESSAGES[failureCode(video.error?.code)] };
      default:
        return { status: 'in_progress', progress: video.progress ?? 0 };
    }
  }

  async download(_job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    const res = await this.call(`/videos/${encodeURIComponent(started.upstreamId)}/content?variant=video`);
    return { kind: 'bytes', video: Buffer.from(await res.arrayBuffer()) };
  }
}
