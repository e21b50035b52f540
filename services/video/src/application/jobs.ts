import { ApiError, type Clock, type VideoFailureCode } from '@oc/contracts';
import { causedBy, type CommandHandler, type EventStore } from '@oc/eventstore';
import { inSpan } from '@oc/telemetry';
import type { ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import { type ActiveVideo, settlementDue, type VideoCommand, videoDecider, type VideoState, videoStream } from '../domain/video';
import { Collections, type VideoDoc } from '../projections/documents';
import type { Billing, FileStore, GeneratedVideo, GenerationJob, Renderer, Scheduler, VideoProvider } from './ports';
import { recordVideoEvents } from './telemetry';

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
  readModels: ReadModels;
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
  /** The `url` of a completed video, until it is persisted: its temporary URL. */
  temporaryUrl(videoId: string): string;
  /** The `url` recorded at persistence: the CDN over the permanent store, or the permanent content path. */
  permanentUrl(video: { orgId: string; videoId: string }): string;
}

export const fileKey = (video: { orgId: string; videoId: string }, variant: 'video' | 'thumbnail') =>
  `${video.orgId}/${video.videoId}.${variant === 'video' ? 'mp4' : 'webp'}`;

const RESUME_PAGE = 500;
/** A create still unfinished this long after it began has died (its bus request timed out long before). */
export const ABANDONED_CREATE_MS = 60_000;

/**
 * Drives every unfinished video from its stream: generation, settlement of its reservation, then the
 * storage lifecycle. Each step loads the stream, does what is due now, appends what happened and schedules
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
      await this.due(videoId);
    } catch (error) {
      this.deps.logger.warn({ err: error, videoId }, 'video step failed; will retry');
      this.track(videoId, this.deps.clock.now() + this.deps.timings.retryMs);
    }
  }

  /**
   * What is due now for this video. A step runs seconds or minutes after the request that created the video,
   * and continues its trace (the stream's first event recorded it) and its causal chain (`apply`).
   */
  private async due(videoId: string): Promise<void> {
    const stream = videoStream(videoId);
    const state = await this.deps.commands.load(stream, videoDecider);
    if (state.status === 'absent') return;
    const origin = await this.deps.commands.origin(stream);
    await inSpan(
      'video job step',
      { parent: origin?.metadata.traceparent, attributes: { 'oc.video_id': videoId, 'oc.video.state': state.status, 'gen_ai.request.model': state.model } },
      () => this.dueNow(state),
    );
  }

  private async dueNow(state: ActiveVideo): Promise<void> {
    if (settlementDue(state)) await this.settle(state);
    if (state.deleted) return;
    const now = this.deps.clock.now();
    if (state.status === 'requested') await this.rejectIfAbandoned(state, now);
    else if (state.status === 'queued' || state.status === 'in_progress') await this.advance(state, now);
    else if (state.status === 'completed') await this.manageStorage(state, now);
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
    // Settlement failed for longer than the reservation's grace: billing gave the funds back, uncharged.
    const expired = !reply.ok && reply.error.code === 'reservation_expired';
    if (!reply.ok && !nothingHeld && !expired) throw new ApiError(reply.error);
    if (expired) this.deps.logger.warn({ videoId: state.videoId }, 'reservation expired before the video was settled; not charged');
    await this.apply(state.videoId, { type: 'RecordSettlement', outcome: due === 'capture' && !expired ? 'charged' : 'refunded' });
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

  /**
   * Starts the job upstream, or polls it, at most once each per step: a job whose next poll is already due
   * when it has started (the simulator with a duration of 0) is polled, and completed, in the same step.
   */
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
    let started = state.upstream && { upstreamId: state.upstream.id, startedAt: state.upstream.startedAt };
    if (!started) {
      const answer = await provider.start(job, now);
      if ('status' in answer) return this.fail(state, answer.code, answer.message);
      started = answer;
      const running = await this.apply(state.videoId, {
        type: 'StartGeneration',
        provider: provider.name,
        upstreamId: started.upstreamId,
        now: started.startedAt,
      });
      const pollAt = provider.nextPollAt(job, started, now);
      if (pollAt > now) return this.track(state.videoId, pollAt);
      if (running.status !== 'in_progress') return this.track(state.videoId);
      state = running;
    }
    const status = await provider.poll(job, started, now);
    switch (status.status) {
      case 'in_progress':
        await this.apply(state.videoId, { type: 'ReportProgress', progress: status.progress });
        return this.track(state.videoId, provider.nextPollAt(job, started, now));
      case 'failed':
        return this.fail(state, status.code, status.message);
      case 'completed': {
        const bytes = await this.store(state, await provider.download(job, started));
        await this.apply(state.videoId, {
          type: 'CompleteGeneration',
          bytes,
          url: this.deps.temporaryUrl(state.videoId),
          now: this.deps.clock.now(),
        });
        return this.track(state.videoId);
      }
    }
  }

  /** Puts the video and its still in temporary storage: a rendered clip's files are linked, not copied. */
  private async store(state: ActiveVideo, output: GeneratedVideo): Promise<number> {
    const { temporary, renderer } = this.deps;
    if (output.kind === 'files') {
      try {
        await Promise.all([
          temporary.putFile(fileKey(state, 'video'), output.video),
          temporary.putFile(fileKey(state, 'thumbnail'), output.thumbnail),
        ]);
      } catch (error) {
        // The rendered files are gone (their directory was cleared): the retried step renders them again.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') renderer.forget(state.size, state.seconds);
        throw error;
      }
      return output.bytes;
    }
    const thumbnail = await renderer.thumbnail(output.video);
    await temporary.put(fileKey(state, 'video'), output.video);
    await temporary.put(fileKey(state, 'thumbnail'), thumbnail);
    return output.video.length;
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
    await this.apply(state.videoId, { type: 'PersistVideo', url: this.deps.permanentUrl(state), now });
    for (const variant of variants) await temporary.remove(fileKey(state, variant));
  }

  /**
   * Appends what the command decides, caused by the video's creation; queries wait for the read model themselves
   * (`readYourWrites`).
   */
  private async apply(videoId: string, command: VideoCommand): Promise<VideoState> {
    const stream = videoStream(videoId);
    const origin = await this.deps.commands.origin(stream);
    const { state, events } = await this.deps.commands.handle(stream, videoDecider, command, origin && causedBy(origin));
    recordVideoEvents(events, state, this.deps.clock.now());
    return state;
  }
}
