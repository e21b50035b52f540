import { ApiError, type Clock, type Replicas, type VideoFailureCode } from '@oc/contracts';
import { causedBy, type CommandHandler, type EventStore } from '@oc/eventstore';
import { inSpan } from '@oc/telemetry';
import { distinctValues, type ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import { type ActiveVideo, NotJobOwner, settlementDue, type VideoCommand, videoDecider, type VideoState, videoStream } from '../domain/video';
import { Collections, type VideoDoc } from '../projections/documents';
import type { Billing, FileStore, GeneratedVideo, GenerationJob, ReferenceImage, Renderer, Scheduler, ServingDeployment, VideoProvider, VideoRouting } from './ports';
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
  /** The deployments of each model for live keys, and the simulator (always used by test keys). */
  providers: { live: VideoRouting; simulator: VideoProvider };
  temporary: FileStore;
  permanent: FileStore;
  renderer: Renderer;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  timings: JobTimings;
  /** This replica's name (it runs the jobs it owns), and which of the others are gone. */
  replicas: Replicas;
  /** The `url` of a completed video, until it is persisted: its temporary URL. */
  temporaryUrl(videoId: string): string;
  /** The `url` recorded at persistence: the CDN over the permanent store, or the permanent content path. */
  permanentUrl(video: { orgId: string; videoId: string }): string;
}

const EXTENSIONS = { video: 'mp4', thumbnail: 'webp', reference: 'ref' } as const;

/** Where a video's files are: the MP4, its still, and the input_reference image it starts from (until submitted). */
export const fileKey = (video: { orgId: string; videoId: string }, variant: keyof typeof EXTENSIONS) =>
  `${video.orgId}/${video.videoId}.${EXTENSIONS[variant]}`;

const RESUME_PAGE = 500;
/** A create still unfinished this long after it began has died (its bus request timed out long before). */
export const ABANDONED_CREATE_MS = 60_000;

/** A job command without the replica that makes it (this one). */
type JobCommand = VideoCommand extends infer C ? (C extends { replica: string } ? Omit<C, 'replica'> : never) : never;

/**
 * Drives every unfinished video from its stream: generation, settlement of its reservation, then the
 * storage lifecycle. Each step loads the stream, does what is due now, appends what happened and schedules
 * the next, so a restart simply resumes from the stream; billing calls are idempotent on the video id,
 * so a step repeated after a crash never charges or refunds twice. A video's job runs on one replica, the
 * one its stream names: its creator, until that replica is gone and another takes the job over (an append
 * with the expected revision, so exactly one does). Every step's append names the replica too, and the
 * decider refuses it from any other, so a replica that lost a job stops at its next append.
 */
export class VideoJobs {
  constructor(private readonly deps: JobDeps) {}

  track(videoId: string, atMs = this.deps.clock.now()): void {
    this.deps.scheduler.schedule(videoId, atMs, () => this.step(videoId));
  }

  private get videos() {
    return this.deps.readModels.collection<VideoDoc>(Collections.videos);
  }

  /**
   * Schedules every video the read model says is not finished with (at start, after a restart): this
   * replica's own, and those of replicas that are gone (or of none, written before replicas), taken over.
   * A live replica's are left to it.
   */
  async resume(): Promise<number> {
    const gone = new Map<string, Promise<boolean>>();
    const isGone = (owner: string) => {
      if (!gone.has(owner)) gone.set(owner, this.deps.replicas.isGone(owner));
      return gone.get(owner)!;
    };
    let resumed = 0;
    for (let last = ''; ; ) {
      const page = await this.videos.find({ open: true, _id: { $gt: last } }, { sort: { _id: 1 }, limit: RESUME_PAGE });
      for (const doc of page) {
        const owner = doc.owner ?? null;
        if (owner === this.deps.replicas.self) this.track(doc._id);
        else if (owner === null || (await isGone(owner))) await this.takeOver(doc._id, owner);
        else continue;
        resumed++;
      }
      if (page.length < RESUME_PAGE) return resumed;
      last = page.at(-1)!._id;
    }
  }

  /**
   * Takes over the unfinished videos of every replica that is gone (a sweep, every few seconds, where
   * replicas share the store): one index seek per replica that runs any, then a page of that one's videos.
   */
  async takeOverFromGoneReplicas(): Promise<number> {
    const { self, isGone } = this.deps.replicas;
    let taken = 0;
    for (const owner of await distinctValues(this.videos, 'owner', { open: true })) {
      if (owner === self || !(await isGone(owner))) continue;
      for (let last = ''; ; ) {
        const page = await this.videos.find({ open: true, owner, _id: { $gt: last } }, { sort: { _id: 1 }, limit: RESUME_PAGE });
        for (const doc of page) if (await this.takeOver(doc._id, owner)) taken++;
        if (page.length < RESUME_PAGE) break;
        last = page.at(-1)!._id;
      }
    }
    return taken;
  }

  /** Makes this replica the job's owner if `from` still is, and schedules it; whether it did. */
  private async takeOver(videoId: string, from: string | null): Promise<boolean> {
    const { self } = this.deps.replicas;
    const stream = videoStream(videoId);
    const origin = await this.deps.commands.origin(stream);
    const { state } = await this.deps.commands.handle(stream, videoDecider, { type: 'TakeOverJob', replica: self, from }, origin && causedBy(origin));
    if (state.status === 'absent' || state.owner !== self) return false;
    this.deps.logger.info({ videoId, from }, 'video job taken over from a stopped replica');
    this.track(videoId);
    return true;
  }

  async step(videoId: string): Promise<void> {
    try {
      await this.due(videoId);
    } catch (error) {
      // Another replica runs this job now: its scheduler has it.
      if (error instanceof NotJobOwner) return;
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
    if (state.status === 'absent' || state.owner !== this.deps.replicas.self) return;
    const origin = await this.deps.commands.origin(stream);
    await inSpan(
      'video job step',
      { parent: origin?.metadata.traceparent, attributes: { 'oc.video.id': videoId, 'oc.video.state': state.status, 'gen_ai.request.model': state.model } },
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
        ? await this.deps.billing.capture(state.orgId, state.videoId, state.costMicros, this.servedUsage(state))
        : await this.deps.billing.release(state.orgId, state.videoId);
    // No such reservation (an abandoned create that died before billing reserved): nothing is held.
    const nothingHeld = !reply.ok && reply.error.status === 404;
    // Settlement failed for longer than the reservation's grace: billing gave the funds back, uncharged.
    const expired = !reply.ok && reply.error.code === 'reservation_expired';
    if (!reply.ok && !nothingHeld && !expired) throw new ApiError(reply.error);
    if (expired) this.deps.logger.warn({ videoId: state.videoId }, 'reservation expired before the video was settled; not charged');
    await this.apply(state.videoId, { type: 'RecordSettlement', outcome: due === 'release' ? 'refunded' : expired ? 'lapsed' : 'charged' });
  }

  /**
   * A create still unfinished a minute after it began has died. Sooner when its job was taken over: the replica
   * that created it is gone, and the decider refuses its acceptance now, so the create can never finish.
   */
  private async rejectIfAbandoned(state: ActiveVideo, now: number): Promise<void> {
    const creatorGone = state.creator !== null && state.owner !== state.creator;
    if (!creatorGone && now < state.queuedAt + ABANDONED_CREATE_MS) return this.track(state.videoId, state.queuedAt + ABANDONED_CREATE_MS);
    await this.apply(state.videoId, { type: 'RejectVideo', reason: 'abandoned' });
    await this.dropReference(state);
    this.track(state.videoId);
  }

  /** The input_reference image, read back for a submission; null when it is gone from the file store. */
  private async referenceImage(state: ActiveVideo): Promise<ReferenceImage | undefined | null> {
    const reference = state.inputReference;
    if (!reference) return undefined;
    const key = fileKey(state, 'reference');
    if ((await this.deps.temporary.size(key)) !== reference.bytes) return null;
    return { data: await this.deps.temporary.read(key, 0, reference.bytes), contentType: reference.content_type };
  }

  /** Once a video is submitted, or will never be, its image is of no more use. */
  private async dropReference(state: ActiveVideo): Promise<void> {
    if (state.inputReference) await this.deps.temporary.remove(fileKey(state, 'reference'));
  }

  /** What the capture paid for: the deployment that generated it and what that cost us. */
  private servedUsage(state: ActiveVideo) {
    const serving = state.upstream && this.deps.providers.live.deployment(state.model, state.upstream.provider);
    if (!serving) return undefined;
    const seconds = Number(state.seconds);
    return {
      product: 'video' as const,
      model: state.model,
      deployment: serving.id,
      provider: serving.provider,
      upstream_model: serving.upstreamModel,
      seconds,
      provider_cost_micros: seconds * serving.costMicrosPerSecond(state.size),
      ...(state.keyId !== null ? { key_id: state.keyId } : {}),
    };
  }

  /**
   * The adapter a started job is polled on: the simulator for test keys, else the deployment it was submitted
   * to. Null when the catalog no longer has that deployment: nothing can reach the job any more.
   */
  private adapterOf(state: ActiveVideo, deployment: string): VideoProvider | null {
    const { live, simulator } = this.deps.providers;
    if (state.mode === 'test') return simulator;
    return live.deployment(state.model, deployment)?.adapter ?? null;
  }

  /** Submits a job: test keys to the simulator, live ones through the router (which fails over). */
  private async submit(state: ActiveVideo, job: GenerationJob, now: number) {
    const { live, simulator } = this.deps.providers;
    if (state.mode === 'test') {
      const answer = await simulator.start(job, now);
      return 'status' in answer ? answer : { ...answer, deployment: simulator.name };
    }
    return live.start(job, now);
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
    const job: GenerationJob = {
      videoId: state.videoId,
      model: state.model,
      prompt: state.prompt,
      seconds: state.seconds,
      size: state.size,
    };
    let started = state.upstream && { upstreamId: state.upstream.id, startedAt: state.upstream.startedAt };
    let deployment = state.upstream?.provider;
    if (!started || deployment === undefined) {
      const image = await this.referenceImage(state);
      if (image === null) return this.fail(state, 'generation_failed', 'The input_reference image of this video could not be read back.');
      const answer = await this.submit(state, { ...job, image }, now);
      if ('status' in answer) return this.fail(state, answer.code, answer.message);
      started = answer;
      deployment = answer.deployment;
      const running = await this.apply(state.videoId, {
        type: 'StartGeneration',
        provider: deployment,
        upstreamId: started.upstreamId,
        now: started.startedAt,
      });
      await this.dropReference(state);
      const pollAt = this.adapterOf(state, deployment)!.nextPollAt(job, started, now);
      if (pollAt > now) return this.track(state.videoId, pollAt);
      if (running.status !== 'in_progress') return this.track(state.videoId);
      state = running;
    }
    const provider = this.adapterOf(state, deployment);
    if (!provider) {
      this.deps.logger.error({ videoId: state.videoId, deployment }, 'video job recorded a deployment the catalog no longer has');
      return this.fail(state, 'generation_failed', 'The provider running this video is no longer available.');
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
    await this.dropReference(state);
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
   * Appends what the command decides, as this replica, caused by the video's creation; queries wait for the
   * read model themselves.
   */
  private async apply(videoId: string, command: JobCommand): Promise<VideoState> {
    const stream = videoStream(videoId);
    const origin = await this.deps.commands.origin(stream);
    const mine = { ...command, replica: this.deps.replicas.self } as VideoCommand;
    const { state, events } = await this.deps.commands.handle(stream, videoDecider, mine, origin && causedBy(origin));
    recordVideoEvents(events, state, this.deps.clock.now());
    return state;
  }
}
