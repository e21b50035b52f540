import { ApiError, type Clock, type VideoFailureCode } from '@oc/contracts';
import { aggregateStream, type CommandHandler, type EventStore } from '@oc/eventstore';
import type { ProjectionRunner, ReadModelStore } from '@oc/readmodel';
import type { Logger } from 'pino';
import { type ActiveVideo, settlementDue, type VideoCommand, videoDecider, videoStream } from '../domain/video';
import { Collections, type VideoDoc } from '../projections/documents';
import type { Billing, FileStore, GenerationJob, Renderer, Scheduler, VideoProvider } from './ports';

export interface JobTimings {
  /** A job still unfinished this long after it was queued fails with `timeout`. */
  jobTimeoutMs: number;
  /** Age (from completion) at which a file is copied to permanent storage. */
  persistAfterMs: number;
  /** Age (from completion) at which the temporary file is gone. */
  tempTtlMs: number;
  /** Delay before a step that failed (billing or storage unreachable) is tried again. */
  retryMs: number;
}

export interface JobDeps {
  eventStore: EventStore;
  commands: CommandHandler;
  readModels: ReadModelStore;
  projections: ProjectionRunner;
  billing: Billing;
  /** The configured upstream for live keys, and the simulator (always used by test keys). */
  providers: { live: VideoProvider; simulator: VideoProvider };
  temporary: FileStore;
  permanent: FileStore;
  renderer: Renderer;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  timings: JobTimings;
  contentUrl(videoId: string): string;
}

export const fileKey = (video: { orgId: string; videoId: string }, variant: 'video' | 'thumbnail') =>
  `${video.orgId}/${video.videoId}.${variant === 'video' ? 'mp4' : 'webp'}`;

const RESUME_PAGE = 500;
/** A create still unfinished this long after it began has died (its bus request timed out long before). */
export const ABANDONED_CREATE_MS = 60_000;

/**
 * Drives every unfinished video from its stream: generation, settlement of its reservation, then the
 * storage lifecycle. Each step loads the stream, does one thing, appends what happened and schedules
 * the next, so a restart simply resumes from the stream; billing calls are idempotent on the video id,
 * so a step repeated after a crash never charges or refunds twice.
 */
export class VideoJobs {
  constructor(private readonly deps: JobDeps) {}

  track(videoId: string, atMs = this.deps.clock.now()): void {
    this.deps.scheduler.schedule(videoId, atMs, () => this.step(videoId));
  }

  /** Schedules every video the read model says is not finished with (at start, after a restart). */
  async resume(): Promise<number> {
    const videos = this.deps.readModels.collection<VideoDoc>(Collections.videos);
    let resumed = 0;
    for (let last = ''; ; ) {
      const page = await videos.find({ open: true, _id: { $gt: last } }, { sort: { _id: 1 }, limit: RESUME_PAGE });
      for (const doc of page) this.track(doc._id);
      resumed += page.length;
      if (page.length < RESUME_PAGE) return resumed;
      last = page.at(-1)!._id;
    }
  }

  async step(videoId: string): Promise<void> {
    try {
      const { state } = await aggregateStream(this.deps.eventStore, videoStream(videoId), videoDecider);
      if (state.status === 'absent') return;
      if (settlementDue(state)) await this.settle(state);
      if (state.deleted) return;
      const now = this.deps.clock.now();
      if (state.status === 'requested') await this.rejectIfAbandoned(state, now);
      else if (state.status === 'queued' || state.status === 'in_progress') await this.advance(state, now);
      else if (state.status === 'completed') await this.manageStorage(state, now);
    } catch (error) {
      this.deps.logger.warn({ err: error, videoId }, 'video step failed; will retry');
      this.track(videoId, this.deps.clock.now() + this.deps.timings.retryMs);
    }
  }

  /** Captures a completed video's reservation or releases a failed or cancelled one, then records it. */
  private async settle(state: ActiveVideo): Promise<void> {
    const due = settlementDue(state);
    if (!due) return;
    const reply =
      due === 'capture'
        ? await this.deps.billing.capture(state.orgId, state.videoId, state.costMicros)
        : await this.deps.billing.release(state.orgId, state.videoId);
    // No such reservation (an abandoned create that died before billing reserved): nothing is held.
    const nothingHeld = !reply.ok && reply.error.status === 404;
    if (!reply.ok && !nothingHeld) throw new ApiError(reply.error);
    await this.apply(state.videoId, { type: 'RecordSettlement', outcome: due === 'capture' ? 'charged' : 'refunded' });
  }

  private async rejectIfAbandoned(state: ActiveVideo, now: number): Promise<void> {
    if (now < state.queuedAt + ABANDONED_CREATE_MS) return this.track(state.videoId, state.queuedAt + ABANDONED_CREATE_MS);
    await this.apply(state.videoId, { type: 'RejectVideo', reason: 'abandoned' });
    this.track(state.videoId);
  }

  private providerFor(state: ActiveVideo): VideoProvider {
    const { live, simulator } = this.deps.providers;
    if (state.mode === 'test') return simulator;
    return state.upstream?.provider === simulator.name ? simulator : live;
  }

  private async advance(state: ActiveVideo, now: number): Promise<void> {
    const { timings } = this.deps;
    if (now - state.queuedAt >= timings.jobTimeoutMs) {
      await this.fail(state, 'timeout', `Video generation did not finish within ${Math.round(timings.jobTimeoutMs / 1000)} seconds.`);
      return;
    }
    const provider = this.providerFor(state);
    const job: GenerationJob = {
      videoId: state.videoId,
      model: state.model,
      prompt: state.prompt,
      seconds: state.seconds,
      size: state.size,
    };
    const next = () => this.track(state.videoId, now + provider.pollIntervalMs);
    if (!state.upstream) {
      const started = await provider.start(job, now);
      if ('status' in started) return this.fail(state, started.code, started.message);
      await this.apply(state.videoId, {
        type: 'StartGeneration',
        provider: provider.name,
        upstreamId: started.upstreamId,
        now: started.startedAt,
      });
      return next();
    }
    const started = { upstreamId: state.upstream.id, startedAt: state.upstream.startedAt };
    const status = await provider.poll(job, started, now);
    switch (status.status) {
      case 'in_progress':
        await this.apply(state.videoId, { type: 'ReportProgress', progress: status.progress });
        return next();
      case 'failed':
        return this.fail(state, status.code, status.message);
      case 'completed': {
        const video = await provider.download(job, started);
        const thumbnail = await this.deps.renderer.thumbnail(video);
        await this.deps.temporary.put(fileKey(state, 'video'), video);
        await this.deps.temporary.put(fileKey(state, 'thumbnail'), thumbnail);
        await this.apply(state.videoId, {
          type: 'CompleteGeneration',
          bytes: video.length,
          url: this.deps.contentUrl(state.videoId),
          now: this.deps.clock.now(),
        });
        return this.track(state.videoId);
      }
    }
  }

  private async fail(state: ActiveVideo, code: VideoFailureCode, message: string): Promise<void> {
    await this.apply(state.videoId, { type: 'FailGeneration', code, message });
    this.track(state.videoId);
  }

  /** Temporary → permanent after `persistAfterMs`; a file not persisted by `tempTtlMs` is gone (410). */
  private async manageStorage(state: ActiveVideo, now: number): Promise<void> {
    if (state.persisted || state.expired || state.completedAt === null) return;
    const { timings, temporary, permanent } = this.deps;
    const variants = ['video', 'thumbnail'] as const;
    if (now >= state.completedAt + timings.tempTtlMs) {
      for (const variant of variants) await temporary.remove(fileKey(state, variant));
      await this.apply(state.videoId, { type: 'ExpireVideo', now });
      return;
    }
    if (now < state.completedAt + timings.persistAfterMs) {
      this.track(state.videoId, state.completedAt + timings.persistAfterMs);
      return;
    }
    for (const variant of variants) {
      const key = fileKey(state, variant);
      const size = await temporary.size(key);
      if (size === null) throw new Error(`Temporary file ${key} is missing`);
      await permanent.put(key, await temporary.read(key, 0, size));
    }
    await this.apply(state.videoId, { type: 'PersistVideo', url: this.deps.contentUrl(state.videoId), now });
    for (const variant of variants) await temporary.remove(fileKey(state, variant));
  }

  private async apply(videoId: string, command: VideoCommand): Promise<void> {
    const result = await this.deps.commands.handle(videoStream(videoId), videoDecider, command);
    if (result.appended) await this.deps.projections.waitFor(result.appended.position);
  }
}
