import type { VideoFailureCode, VideoModel } from '@oc/contracts';
import type { GeneratedVideo, GenerationJob, StartedGeneration, UpstreamFailure, UpstreamStatus, VideoProvider } from '../application/ports';

export interface OpenAiProviderOptions {
  /** e.g. `https://api.openai.com/v1` */
  baseUrl: string;
  apiKey: string;
  models: Record<VideoModel, string>;
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

/** OpenAI names moderation failures in a few ways; anything else that failed is a generation failure. */
function failureCode(code: string | null | undefined): VideoFailureCode {
  if (!code) return 'generation_failed';
  if (/moderation|policy|safety|content_filter/i.test(code)) return 'content_policy_violation';
  if (/quota|billing/i.test(code)) return 'insufficient_quota';
  return 'generation_failed';
}

class UpstreamError extends Error {
  constructor(
    readonly status: number,
    readonly body: UpstreamErrorBody,
  ) {
    super(`Upstream answered ${status}: ${body.error?.message ?? 'no message'}`);
    this.name = 'UpstreamError';
  }
}

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

  private async call(path: string, init: RequestInit = {}): Promise<Response> {
    const res = await fetch(`${this.options.baseUrl.replace(/\/$/, '')}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${this.options.apiKey}`, ...init.headers },
      signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
    });
    if (!res.ok) throw new UpstreamError(res.status, (await res.json().catch(() => ({}))) as UpstreamErrorBody);
    return res;
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration | UpstreamFailure> {
    const form = new FormData();
    form.set('model', this.options.models[job.model]);
    form.set('prompt', job.prompt);
    form.set('seconds', job.seconds);
    form.set('size', job.size);
    try {
      const video = (await (await this.call('/videos', { method: 'POST', body: form })).json()) as UpstreamVideo;
      return { upstreamId: video.id, startedAt: now };
    } catch (error) {
      // A 4xx other than rate limiting will not change on retry (except a quota the owner must top up).
      if (error instanceof UpstreamError && error.status >= 400 && error.status < 500 && error.status !== 408) {
        const code = error.body.error?.code;
        if (error.status !== 429 || /quota/i.test(code ?? '')) {
          return { status: 'failed', code: failureCode(code), message: error.body.error?.message ?? 'The upstream refused the job.' };
        }
      }
      throw error;
    }
  }

  async poll(_job: GenerationJob, started: StartedGeneration): Promise<UpstreamStatus> {
    const video = (await (await this.call(`/videos/${encodeURIComponent(started.upstreamId)}`)).json()) as UpstreamVideo;
    switch (video.status) {
      case 'completed':
        return { status: 'completed' };
      case 'failed':
        return {
          status: 'failed',
          code: failureCode(video.error?.code),
          message: video.error?.message ?? 'Video generation failed upstream.',
        };
      default:
        return { status: 'in_progress', progress: video.progress ?? 0 };
    }
  }

  async download(_job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    const res = await this.call(`/videos/${encodeURIComponent(started.upstreamId)}/content?variant=video`);
    return { kind: 'bytes', video: Buffer.from(await res.arrayBuffer()) };
  }
}
