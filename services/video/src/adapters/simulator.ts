import { createHash } from 'node:crypto';
import { VIDEO_FAILURE_CODES, type VideoFailureCode } from '@oc/contracts';
import type { GeneratedVideo, GenerationJob, Renderer, StartedGeneration, UpstreamStatus, VideoProvider } from '../application/ports';

/** Between the video id and the image's digest in the upstream id of a job that starts from an image. */
const IMAGE_MARK = ':image:';

/** `[sim:fail=<code>]` in a prompt makes the simulated job fail with that code (for tests and demos). */
const FAIL_DIRECTIVE = /\[sim:fail=([a-z_]+)\]/;
/** Where a failing simulated job stops, as a fraction of its duration (the spec's examples fail at 35 and 45). */
const FAIL_AT = 0.4;
/** `[sim:stall]` keeps the job in progress at half way until the service's job time limit fails it. */
const STALL_DIRECTIVE = '[sim:stall]';

export function simulatedFailure(prompt: string): VideoFailureCode | null {
  const code = FAIL_DIRECTIVE.exec(prompt)?.[1];
  if (code === undefined) return null;
  return (VIDEO_FAILURE_CODES as readonly string[]).includes(code) ? (code as VideoFailureCode) : 'generation_failed';
}

const FAILURE_MESSAGES: Record<VideoFailureCode, string> = {
  content_policy_violation: 'The prompt was flagged by the content policy during generation.',
  generation_failed: 'Video generation failed.',
  timeout: 'Video generation took too long.',
  insufficient_quota: 'The upstream provider has no quota left for this job.',
};

/**
 * The embedded upstream: progress follows the injected clock from the start time recorded on the
 * video stream, so a job resumes where it was after a restart. A job is polled every `pollIntervalMs`,
 * and once more exactly when it is due to finish (or fail); with a duration of 0 it is finished as soon
 * as it has started. Completion serves the renderer's clip of that size and length, or, for a job with an
 * input_reference, a clip of that image (rendered when the job starts, kept under the image's digest, which the
 * upstream id carries so that the job finds it again after a restart).
 */
export class SimulatedProvider implements VideoProvider {
  readonly name = 'simulator';

  constructor(
    private readonly options: { durationMs: number; pollIntervalMs: number; renderer: Renderer },
  ) {}

  async start(job: GenerationJob, now: number): Promise<StartedGeneration> {
    if (!job.image) return { upstreamId: `sim_${job.videoId}`, startedAt: now };
    await this.options.renderer.imageClip(job.image.data, job.size, job.seconds);
    return { upstreamId: `sim_${job.videoId}${IMAGE_MARK}${createHash('sha256').update(job.image.data).digest('hex')}`, startedAt: now };
  }

  /** The next poll interval, or sooner when the job finishes (or fails) before that. */
  nextPollAt(job: GenerationJob, started: StartedGeneration, now: number): number {
    const { durationMs, pollIntervalMs } = this.options;
    const next = now + pollIntervalMs;
    if (job.prompt.includes(STALL_DIRECTIVE) && !simulatedFailure(job.prompt)) return next;
    const endsAt = started.startedAt + (simulatedFailure(job.prompt) ? FAIL_AT : 1) * durationMs;
    return Math.min(next, Math.max(now, Math.ceil(endsAt)));
  }

  async poll(job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus> {
    const { durationMs } = this.options;
    const fraction = durationMs > 0 ? (now - started.startedAt) / durationMs : 1;
    const failure = simulatedFailure(job.prompt);
    if (failure && fraction >= FAIL_AT) return { status: 'failed', code: failure, message: FAILURE_MESSAGES[failure] };
    if (job.prompt.includes(STALL_DIRECTIVE)) return { status: 'in_progress', progress: Math.min(50, Math.floor(fraction * 100)) };
    if (fraction >= 1) return { status: 'completed' };
    return { status: 'in_progress', progress: Math.floor(fraction * 100) };
  }

  async download(job: GenerationJob, started: StartedGeneration): Promise<GeneratedVideo> {
    const digest = started.upstreamId.split(IMAGE_MARK)[1];
    if (digest === undefined) return { kind: 'files', ...(await this.options.renderer.clip(job.size, job.seconds)) };
    const clip = await this.options.renderer.renderedImageClip(digest, job.size, job.seconds);
    // The image itself is dropped once the job started: a clip removed from disk since cannot be made again.
    if (!clip) throw new Error(`The simulator's clip of the input_reference image of ${job.videoId} is gone from disk`);
    return { kind: 'files', ...clip };
  }
}
