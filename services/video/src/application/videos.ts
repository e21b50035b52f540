import { createHash } from 'node:crypto';
import {
  ApiError,
  type Clock,
  conflict,
  contentPolicyViolation,
  type CreateVideoRequest,
  DomainError,
  type IdSource,
  invalidRequest,
  type Replicas,
  microsToUsd,
  type Video,
  VIDEO_MIN_POLL_MS,
  type VideoContentCopy,
  type VideoContentInfo,
  type VideoMessage,
  type VideoRead,
  type VideoReferenceRecord,
  type VideoPriceList,
  type VideoSize,
  type VideoStatus,
  type DeploymentStatus,
} from '@oc/contracts';
import { type CommandHandler, KeyedMutex } from '@oc/eventstore';
import type { Logger } from 'pino';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import { setActiveSpanAttributes } from '@oc/telemetry';
import { violatesContentPolicy } from '../domain/content-policy';
import { type VideoPrices, videoPriceMicros } from '../domain/pricing';
import { idempotencyKeyDecider, type IdempotencyKeyState, idempotencyKeyStream } from '../domain/idempotency';
import { billingOf, type SettlementOutcome, type VideoCommand, videoDecider, videoStream } from '../domain/video';
import { Collections, type VideoDoc } from '../projections/documents';
import { ABANDONED_CREATE_MS, fileKey, type JobTimings, type VideoJobs } from './jobs';
import type { Billing, FileStore, ReferenceImage, VideoRouting } from './ports';
import { recordVideoEvents } from './telemetry';

export interface VideoServiceDeps {
  commands: CommandHandler;
  readModels: ReadModels;
  billing: Billing;
  jobs: VideoJobs;
  temporary: FileStore;
  permanent: FileStore;
  clock: Clock;
  ids: IdSource;
  /** The models served, each at its price: the spec's (VIDEO_PRICES) and the catalog's own. */
  prices: VideoPrices;
  /** What the deployments of each model can generate: a request none can serve is refused before it is charged. */
  routing: Pick<VideoRouting, 'unsupported' | 'pollIntervalMs'>;
  /** How often the simulator, which runs test keys' jobs, is polled (SIM_VIDEO_POLL_MS). */
  simulatorPollIntervalMs: number;
  /** How each deployment fares, as this replica's router sees it. */
  deployments(): DeploymentStatus[];
  timings: JobTimings;
  /** This replica's name: it runs the jobs of the videos it creates. */
  replicas: Pick<Replicas, 'self'>;
  /** How long a request waits for another request's create under the same Idempotency-Key (real time). */
  idempotencyWaitMs?: number;
  /**
   * A persisted video's `url` made at read time, when its object store signs URLs (S3 without a CDN):
   * `undefined` keeps the URL recorded at persistence.
   */
  signPermanentUrl?: ((key: string) => Promise<string>) | undefined;
  logger: Logger;
}

/** Videos a client can see: accepted (funds held), not deleted. */
const VISIBLE = { deleted: false, status: { $nin: ['requested', 'rejected'] } };

/** Stripe's window: a key is remembered for 24 hours. */
const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
const RESERVATION_GRACE_MS = 60 * 60 * 1000;

const CONTENT_TYPES = { video: 'video/mp4', thumbnail: 'image/webp' } as const;

const reused = () =>
  conflict(
    'idempotency_key_reused',
    'This Idempotency-Key was already used with a different request in the last 24 hours; use a new key for a new request.',
  );

interface Caller {
  org_id: string;
  mode: 'live' | 'test';
  key_id?: string | undefined;
  idempotency_key?: string | undefined;
}

const seconds = (ms: number) => Math.floor(ms / 1000);

/** The video a request is about, on its span, so that the video's traces are found by its id. */
const onSpan = (orgId: string, videoId: string) => setActiveSpanAttributes({ 'oc.video.id': videoId, 'oc.organization.id': orgId });

/** A request waiting for another's create under its Idempotency-Key looks at that video this often. */
const IDEMPOTENCY_POLL_MS = 25;

export class VideoService {
  /** Serializes this replica's requests that share an idempotency key (fewer claims that lose). */
  private readonly idempotency = new KeyedMutex();

  constructor(private readonly deps: VideoServiceDeps) {}

  private get videos() {
    return this.deps.readModels.collection<VideoDoc>(Collections.videos);
  }

  deployments(): DeploymentStatus[] {
    return this.deps.deployments();
  }

  async create(m: VideoMessage<'create'>): Promise<Video> {
    const request: CreateVideoRequest = { model: m.model, prompt: m.prompt, seconds: m.seconds, size: m.size };
    const image = m.input_reference && { data: Buffer.from(m.input_reference.data, 'base64'), contentType: m.input_reference.content_type };
    return this.createVideo(m, request, null, image);
  }

  async remix(m: VideoMessage<'remix'>): Promise<Video> {
    const source = await this.visible(m.org_id, m.video_id);
    if (source.status !== 'completed') {
      throw invalidRequest('video_not_completed', `Video ${source._id} is ${source.status}; only a completed video can be remixed.`);
    }
    if (!this.serves(source.model)) {
      throw invalidRequest('invalid_model', `Video ${source._id} was made with ${source.model}, which is no longer served here; create a new video with one of ${this.models().join(', ')}.`);
    }
    // A remix is the source's settings with a new prompt, text to video as the remix request has no image.
    const request: CreateVideoRequest = { model: source.model, prompt: m.prompt, seconds: source.seconds, size: source.size };
    return this.createVideo(m, request, source._id);
  }

  async get(m: VideoMessage<'get'>): Promise<Video> {
    return (await this.read(m)).video;
  }

  /** The video as a read answers it, with how long a client should wait before the next read. */
  async read(m: VideoMessage<'get'>): Promise<VideoRead> {
    const doc = await this.visible(m.org_id, m.video_id);
    return this.withPollAfter(await this.present(doc), doc.mode, doc.deployment ?? null);
  }

  /**
   * A video with how long a client should wait before reading it again while it runs: never sooner than the
   * spec's 5 seconds, nor before the service polls its provider again (a read could show nothing new before).
   * One steady figure rather than a countdown to an estimated end, because OpenAI's poll helper keeps the
   * first value it reads for the whole wait. None once the video has ended.
   */
  withPollAfter(video: Video, mode: 'live' | 'test', deployment: string | null = null): VideoRead {
    if (video.status !== 'queued' && video.status !== 'in_progress') return { video, poll_after_ms: null };
    const polled = mode === 'test' ? this.deps.simulatorPollIntervalMs : this.deps.routing.pollIntervalMs(video.model, deployment);
    return { video, poll_after_ms: Math.max(VIDEO_MIN_POLL_MS, polled ?? 0) };
  }

  async list(m: VideoMessage<'list'>) {
    const page = await pageAfter(this.videos, { org_id: m.org_id, ...VISIBLE }, 'queued_at', m);
    const data = await Promise.all(page.data.map((doc) => this.present(doc)));
    return {
      object: 'list' as const,
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: page.has_more,
    };
  }

  /** Removes the files at once; a job still running is cancelled and its reservation released. */
  async delete(m: VideoMessage<'delete'>) {
    const doc = await this.owned(m.org_id, m.video_id);
    await this.apply(doc._id, { type: 'DeleteVideo', now: this.deps.clock.now() });
    const video = { orgId: doc.org_id, videoId: doc._id };
    for (const store of [this.deps.temporary, this.deps.permanent]) {
      for (const variant of ['video', 'thumbnail'] as const) await store.remove(fileKey(video, variant));
    }
    await this.deps.temporary.remove(fileKey(video, 'reference'));
    this.deps.jobs.track(doc._id);
    return { id: doc._id, object: 'video.deleted' as const, deleted: true as const };
  }

  async describeContent(m: VideoMessage<'describeContent'>): Promise<VideoContentInfo> {
    const { store, key } = await this.contentLocation(m);
    const size = await store.size(key);
    if (size === null) throw new Error(`Content of ${m.video_id} is missing from storage`);
    return { content_type: CONTENT_TYPES[m.variant], size };
  }

  async readContent(m: VideoMessage<'readContent'>): Promise<{ data: string }> {
    const { store, key } = await this.contentLocation(m);
    return { data: (await store.read(key, m.offset, m.length)).toString('base64') };
  }

  /**
   * Where a copy's bytes are. The temporary URL serves for `tempTtlMs` after completion, from the temporary
   * file or, once persisted, from the permanent one, and is gone after that whatever became of the video; the
   * permanent URL serves a persisted video only.
   */
  private async contentLocation(m: { org_id: string; video_id: string; variant: 'video' | 'thumbnail'; copy: VideoContentCopy }) {
    const doc = await this.visible(m.org_id, m.video_id);
    if (doc.status !== 'completed') {
      throw invalidRequest('video_not_ready', `Video ${doc._id} is ${doc.status}; its content is available once it is completed.`);
    }
    if (m.copy === 'temporary' && doc.completed_at !== null && this.deps.clock.now() >= doc.completed_at + this.deps.timings.tempTtlMs) {
      const minutes = Math.round(this.deps.timings.tempTtlMs / 60_000);
      throw new ApiError({
        status: 410,
        type: 'invalid_request_error',
        code: 'temporary_url_expired',
        message: `This temporary URL of video ${doc._id} expired ${minutes} minutes after the video completed; the video was persisted: GET /v1/videos/${doc._id} gives its permanent url.`,
      });
    }
    if (m.copy === 'permanent' && !doc.persisted) {
      throw invalidRequest(
        'video_not_persisted',
        `Video ${doc._id} is not persisted yet (x-persisted is false); until it is, download it from its url or /v1/videos/${doc._id}/content.`,
      );
    }
    return {
      store: doc.persisted ? this.deps.permanent : this.deps.temporary,
      key: fileKey({ orgId: doc.org_id, videoId: doc._id }, m.variant),
    };
  }

  /** Every model served, each of its sizes with its price per second. */
  prices(): VideoPriceList {
    const data = Object.entries(this.deps.prices).flatMap(([model, sizes]) =>
      Object.entries(sizes).map(([size, per_second]) => ({ model, size: size as VideoSize, per_second })),
    );
    return { object: 'list', data };
  }

  /** The spec's models and the catalog's own: the gateway checks a model id's form only. */
  private models(): string[] {
    return Object.keys(this.deps.prices);
  }

  private serves(model: string): boolean {
    return Object.hasOwn(this.deps.prices, model);
  }

  private async createVideo(caller: Caller, request: CreateVideoRequest, remixedFrom: string | null, image?: ReferenceImage): Promise<Video> {
    // As the gateway answered when it knew the spec's models only.
    if (!this.serves(request.model)) throw invalidRequest('invalid_model', `Invalid 'model': model must be one of ${this.models().join(', ')}.`, 'model');
    if (violatesContentPolicy(request.prompt)) {
      throw contentPolicyViolation('The prompt violates the content policy; nothing was created or charged.');
    }
    // Test keys are served by the simulator, which makes every length and size.
    const unsupported = caller.mode === 'live' ? this.deps.routing.unsupported({ ...request, imageType: image?.contentType }) : undefined;
    if (unsupported === 'input_reference') {
      throw invalidRequest(
        'unsupported_parameter',
        `No provider serving ${request.model} here generates a video from a ${image!.contentType.slice('image/'.length).toUpperCase()} input_reference image.`,
        unsupported,
      );
    }
    if (unsupported) {
      throw invalidRequest(
        'unsupported_parameter',
        `No provider serving ${request.model} here generates ${unsupported === 'seconds' ? `${request.seconds}-second videos` : `${request.seconds}-second videos of size ${request.size}`}; choose another ${unsupported}.`,
        unsupported,
      );
    }
    const reference = image && referenceRecord(image);
    const key = caller.idempotency_key;
    if (key === undefined) return this.queue(caller, request, remixedFrom, null, this.deps.ids.next('video_'), image);
    const requestHash = createHash('sha256').update(JSON.stringify([remixedFrom, request, ...(reference ? [reference.sha256] : [])])).digest('hex');
    return this.idempotency.run(`${caller.org_id}\n${caller.mode}\n${key}`, async () => {
      // The read model answers a repeat of an accepted request at once (and knows keys used before claims).
      // A key is the caller's mode's: the same key from the organization's key of the other mode is another request.
      const [first] = await this.videos.find(
        {
          org_id: caller.org_id,
          mode: caller.mode,
          idempotency_key: key,
          // A create that never got its funds held has no first response to repeat.
          status: { $nin: ['requested', 'rejected'] },
          queued_at: { $gt: this.deps.clock.now() - IDEMPOTENCY_WINDOW_MS },
        },
        { sort: { queued_at: -1 }, limit: 1 },
      );
      if (first) return this.repeat(first, requestHash);
      return this.claimThenQueue(caller, request, remixedFrom, key, requestHash, image);
    });
  }

  /**
   * The key's stream decides which request creates the video, across replicas: each appends a claim with
   * the revision it read, one wins and creates; the others answer with the winner's video once it is
   * accepted, or claim again in place of one that was refused (a 402, an abandoned create).
   */
  private async claimThenQueue(caller: Caller, request: CreateVideoRequest, remixedFrom: string | null, key: string, requestHash: string, image?: ReferenceImage) {
    const videoId = this.deps.ids.next('video_');
    const stream = idempotencyKeyStream(caller.org_id, caller.mode, key);
    let replacing: string | null = null;
    for (;;) {
      const { state }: { state: IdempotencyKeyState } = await this.deps.commands.handle(stream, idempotencyKeyDecider, {
        type: 'ClaimIdempotencyKey',
        orgId: caller.org_id,
        videoId,
        requestHash,
        now: this.deps.clock.now(),
        windowMs: IDEMPOTENCY_WINDOW_MS,
        replacing,
      });
      if (state.status === 'unclaimed') throw new Error(`Idempotency key stream ${stream} was not claimed`);
      if (state.videoId === videoId) return this.queue(caller, request, remixedFrom, { key, requestHash }, videoId, image);
      if (state.requestHash !== requestHash) throw reused();
      const outcome = await this.createOutcome(state.videoId, state.claimedAt);
      if (outcome === 'refused') {
        replacing = state.videoId;
        continue;
      }
      if (outcome === 'pending') {
        throw conflict(
          'idempotency_key_in_use',
          'Another request with this Idempotency-Key is still being processed; retry it in a moment to get its result.',
        );
      }
      return this.firstResponse((await this.videos.findOne({ _id: state.videoId }))!);
    }
  }

  /**
   * How another request's create under the same key ended, read from the video's own stream (not a read
   * model): `accepted` (its funds are held), `refused` (never accepted), or still `pending` after
   * `idempotencyWaitMs`. A claim whose video never appeared within a minute died with its process.
   */
  private async createOutcome(videoId: string, claimedAt: number): Promise<'accepted' | 'refused' | 'pending'> {
    const until = Date.now() + (this.deps.idempotencyWaitMs ?? 8_000);
    for (;;) {
      const video = await this.deps.commands.load(videoStream(videoId), videoDecider);
      if (video.status === 'rejected') return 'refused';
      if (video.status === 'absent' && this.deps.clock.now() >= claimedAt + ABANDONED_CREATE_MS) return 'refused';
      if (video.status !== 'absent' && video.status !== 'requested') return 'accepted';
      if (Date.now() >= until) return 'pending';
      await new Promise((resolve) => setTimeout(resolve, IDEMPOTENCY_POLL_MS));
    }
  }

  private repeat(first: VideoDoc, requestHash: string): Video {
    if (first.request_hash !== requestHash) throw reused();
    return this.firstResponse(first);
  }

  private async queue(
    caller: Caller,
    request: CreateVideoRequest,
    remixedFrom: string | null,
    idempotency: { key: string; requestHash: string } | null,
    videoId: string,
    image?: ReferenceImage,
  ): Promise<Video> {
    // A remix's new video, in place of its source.
    onSpan(caller.org_id, videoId);
    const costMicros = videoPriceMicros(this.deps.prices, request.model, request.size, request.seconds);
    const replica = this.deps.replicas.self;
    const files = { orgId: caller.org_id, videoId };
    // In the file store, where the job finds it after a restart too; the stream records only what it is.
    if (image) await this.deps.temporary.put(fileKey(files, 'reference'), image.data);
    // Recorded before billing is asked, so that a reservation whose create never finished is found and released.
    await this.apply(videoId, {
      type: 'RequestVideo',
      orgId: caller.org_id,
      videoId,
      mode: caller.mode,
      ...request,
      costMicros,
      remixedFromVideoId: remixedFrom,
      inputReference: image ? referenceRecord(image) : null,
      idempotencyKey: idempotency?.key ?? null,
      requestHash: idempotency?.requestHash ?? null,
      now: this.deps.clock.now(),
      replica,
      keyId: caller.key_id,
    });
    if (caller.mode === 'live') {
      const description = `Video ${videoId} (${request.model}, ${request.seconds}s, ${request.size})`;
      const reply = await this.deps.billing.reserve(caller.org_id, videoId, costMicros, description, this.reservationExpiry(), caller.key_id);
      if (!reply.ok) {
        // Any answer but a 402 leaves open whether the funds were held: release them to be sure.
        const reason = reply.error.status === 402 ? 'insufficient_quota' : 'abandoned';
        await this.apply(videoId, { type: 'RejectVideo', reason, replica });
        if (reason === 'abandoned') this.deps.jobs.track(videoId);
        else await this.deps.temporary.remove(fileKey(files, 'reference'));
        throw new ApiError(reply.error);
      }
    }
    try {
      await this.apply(videoId, { type: 'AcceptVideo', replica });
    } finally {
      // Accepted: the job starts at once, while this answer waits for the read model. Not recorded: the job
      // step releases the reservation as abandoned.
      this.deps.jobs.track(videoId);
    }
    return this.firstResponse((await this.videos.findOne({ _id: videoId }))!);
  }

  /**
   * A job is settled by its timeout at the latest; billing's own release is the safety net for one whose
   * settlement keeps failing (billing unreachable), so it waits an hour longer.
   */
  private reservationExpiry(): number {
    return seconds(this.deps.clock.now() + this.deps.timings.jobTimeoutMs + RESERVATION_GRACE_MS);
  }

  /** Appends what the command decides; queries wait for the read model themselves (`readYourWrites`). */
  private async apply(videoId: string, command: VideoCommand): Promise<void> {
    const { state, events } = await this.deps.commands.handle(videoStream(videoId), videoDecider, command);
    recordVideoEvents(events, state, this.deps.clock.now());
  }

  /** Missing, deleted and other organizations' videos are all the same 404. */
  private async owned(orgId: string, videoId: string): Promise<VideoDoc> {
    onSpan(orgId, videoId);
    const doc = await this.videos.findOne({ _id: videoId, org_id: orgId, ...VISIBLE });
    if (!doc) throw new DomainError({ kind: 'NotFound', resource: 'video', id: videoId });
    return doc;
  }

  /** As `owned`, and 410 once a never-persisted file has outlived temporary storage. */
  private async visible(orgId: string, videoId: string): Promise<VideoDoc> {
    const doc = await this.owned(orgId, videoId);
    if (this.isExpired(doc)) {
      throw new ApiError({
        status: 410,
        type: 'invalid_request_error',
        code: 'video_expired',
        message: `Video ${videoId} expired: it is older than ${Math.round(this.deps.timings.tempTtlMs / 60_000)} minutes and was never persisted.`,
      });
    }
    return doc;
  }

  private isExpired(doc: VideoDoc): boolean {
    if (doc.status !== 'completed' || doc.persisted || doc.completed_at === null) return false;
    return doc.expired || this.deps.clock.now() >= doc.completed_at + this.deps.timings.tempTtlMs;
  }

  /** The video as the create call answered it: queued, nothing generated yet. */
  private firstResponse(doc: VideoDoc): Video {
    // A repeated Idempotency-Key's answer is the first request's video.
    onSpan(doc.org_id, doc._id);
    return {
      ...this.toVideo(doc),
      status: 'queued',
      progress: 0,
      url: null,
      error: null,
      'x-billing': billingOf({ mode: doc.mode, status: 'queued', settlement: null }),
      'x-storage-provider': 'upstream',
      'x-persisted': false,
      completed_at: null,
      expires_at: null,
    };
  }

  /** The video as a client reads it; a persisted one's signed URL is made afresh on every read. */
  private async present(doc: VideoDoc): Promise<Video> {
    const video = this.toVideo(doc);
    const sign = this.deps.signPermanentUrl;
    if (!doc.persisted || !sign) return video;
    try {
      return { ...video, url: await sign(fileKey({ orgId: doc.org_id, videoId: doc._id }, 'video')) };
    } catch (err) {
      // A read must not fail for it: the recorded URL (the permanent content path) still works with the key.
      this.deps.logger.warn({ err, video_id: doc._id }, 'could not sign the permanent URL; answering the recorded one');
      return video;
    }
  }

  private toVideo(doc: VideoDoc): Video {
    const completed = doc.status === 'completed' && doc.completed_at !== null;
    return {
      id: doc._id,
      object: 'video',
      created: doc.created,
      created_at: doc.created,
      model: doc.model,
      prompt: doc.prompt,
      status: doc.status as VideoStatus,
      progress: doc.progress,
      seconds: doc.seconds,
      size: doc.size,
      url: completed ? doc.url : null,
      error: doc.error,
      'x-cost': { amount: microsToUsd(doc.cost_micros), currency: 'usd' },
      'x-billing': billingOf({ mode: doc.mode, status: doc.status, settlement: settlementOf(doc) }),
      'x-storage-provider': doc.persisted ? 'object_store' : 'upstream',
      'x-persisted': doc.persisted,
      remixed_from_video_id: doc.remixed_from_video_id,
      completed_at: completed ? seconds(doc.completed_at!) : null,
      expires_at: completed && !doc.persisted ? seconds(doc.completed_at! + this.deps.timings.tempTtlMs) : null,
    };
  }

  async ping() {
    await this.deps.readModels.ping();
    return { status: 'ok' as const };
  }
}

/**
 * How the video's settlement went. A document projected before the outcome was kept says only that it was
 * settled: a completed video's settlement is its capture unless billing had let the hold lapse first, which
 * such a document cannot tell, so it is taken as charged.
 */
function settlementOf(doc: VideoDoc): SettlementOutcome | null {
  if (doc.settlement !== undefined) return doc.settlement;
  if (!doc.settled) return null;
  return doc.status === 'completed' ? 'charged' : 'refunded';
}

/** What the stream records of an image: its type, size and digest, never its bytes. */
function referenceRecord(image: ReferenceImage): VideoReferenceRecord {
  return { content_type: image.contentType, bytes: image.data.length, sha256: createHash('sha256').update(image.data).digest('hex') };
}
