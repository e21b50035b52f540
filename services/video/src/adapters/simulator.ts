import { VIDEO_FAILURE_CODES, type VideoFailureCode } from '@oc/contracts';
import type { GenerationJob, Renderer, StartedGeneration, UpstreamStatus, VideoProvider } from '../application/ports';

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
 * video stream, so a job resumes where it was after a restart. Completion renders a real MP4.
 */
export class SimulatedProvider implements VideoProvider {
  readonly name = 'simulator';

  constructor(
    private readonly options: { durationMs: number; pollIntervalMs: number; renderer: Renderer },
  ) {}

  get pollIntervalMs() {
    return this.options.pollIntervalMs;
  }

  async start(job: GenerationJob, now: number): Promise<StartedGeneration> {
    return { upstreamId: `sim_${job.videoId}`, startedAt: now };
  }

  async poll(job: GenerationJob, started: StartedGeneration, now: number): Promise<UpstreamStatus> {
    const fraction = (now - started.startedAt) / this.options.durationMs;
    const failure = simulatedFailure(job.prompt);
    if (failure && fraction >= FAIL_AT) return { status: 'failed', code: failure, message: FAILURE_MESSAGES[failure] };
    if (job.prompt.includes(STALL_DIRECTIVE)) return { status: 'in_progress', progress: Math.min(50, Math.floor(fraction * 100)) };
    if (fraction >= 1) return { status: 'completed' };
    return { status: 'in_progress', progress: Math.floor(fraction * 100) };
  }

  download(job: GenerationJob): Promise<Buffer> {
    return this.options.renderer.clip(job.size, job.seconds);
  }
}
