import { DomainError, microsToUsd, type VideoBilling, type VideoEvent, type VideoReferenceRecord, type VideoEventData, type VideoFailureCode, type VideoModel, type VideoSeconds, type VideoSize, type VideoStatus, VideoStreams, streamName } from '@oc/contracts';

/** The events of a video's own stream (the Idempotency-Key's claims live on streams of their own). */
export type VideoJobEvent = Exclude<VideoEvent, { type: 'VideoIdempotencyKeyClaimed' }>;

/**
 * The job is another replica's: the one named in the stream (its creator, or the replica that took it over
 * last). Only the owner works on a video, so that each step, and each upstream call, is made once.
 */
export class NotJobOwner extends Error {
  constructor(
    readonly videoId: string,
    readonly owner: string | null,
  ) {
    super(`Video ${videoId} is run by ${owner === null ? 'no replica yet' : `replica ${owner}`}`);
    this.name = 'NotJobOwner';
  }
}

/**
 * One video job (stream `video-<id>`): its state machine (queued → in_progress → completed | failed),
 * its storage sub-state (temporary, then persisted or expired), whether its reservation has been settled,
 * and which replica runs it. Times are milliseconds and arrive on the commands. Every command but a
 * delete (the client's) and a takeover names the replica that makes it, and only the owner's are decided.
 */
export type VideoCommand =
  | {
      type: 'RequestVideo';
      orgId: string;
      videoId: string;
      mode: 'live' | 'test';
      model: VideoModel;
      prompt: string;
      seconds: VideoSeconds;
      size: VideoSize;
      costMicros: number;
      remixedFromVideoId: string | null;
      inputReference: VideoReferenceRecord | null;
      idempotencyKey: string | null;
      requestHash: string | null;
      now: number;
      replica: string;
      /** The API key that asked, named on the capture. */
      keyId?: string | undefined;
    }
  | { type: 'AcceptVideo'; replica: string }
  | { type: 'RejectVideo'; reason: 'insufficient_quota' | 'abandoned'; replica: string }
  | { type: 'StartGeneration'; provider: string; upstreamId: string; now: number; replica: string }
  | { type: 'ReportProgress'; progress: number; replica: string }
  | { type: 'CompleteGeneration'; bytes: number; url: string; now: number; replica: string }
  | { type: 'FailGeneration'; code: VideoFailureCode; message: string; replica: string }
  | { type: 'PersistVideo'; url: string; now: number; replica: string }
  | { type: 'ExpireVideo'; now: number; replica: string }
  /**
   * How billing settled the reservation: the capture charged it, the release gave it back, or (`lapsed`) the
   * capture came after billing had let the hold expire, so a completed video was given back uncharged.
   */
  | { type: 'RecordSettlement'; outcome: 'charged' | 'refunded' | 'lapsed'; replica: string }
  | { type: 'DeleteVideo'; now: number }
  /** `replica` runs the job from now on, if `from` still did (null: a video from before replicas). */
  | { type: 'TakeOverJob'; replica: string; from: string | null };

/** The spec's statuses, and the two a client never sees: before the funds are held, and never accepted. */
export type VideoPhase = 'requested' | 'rejected' | VideoStatus;

export interface ActiveVideo {
  status: VideoPhase;
  orgId: string;
  videoId: string;
  mode: 'live' | 'test';
  /** The API key that asked; null for videos requested before it was recorded. */
  keyId: string | null;
  model: VideoModel;
  prompt: string;
  seconds: VideoSeconds;
  size: VideoSize;
  costMicros: number;
  remixedFromVideoId: string | null;
  /** The image it starts from; its bytes are in the temporary file store until it is submitted. */
  inputReference: VideoReferenceRecord | null;
  queuedAt: number;
  progress: number;
  url: string | null;
  error: { code: VideoFailureCode; message: string } | null;
  upstream: { provider: string; id: string; startedAt: number } | null;
  completedAt: number | null;
  persisted: boolean;
  expired: boolean;
  settled: boolean;
  deleted: boolean;
  /** The replica that runs the job; null for a video created before replicas, until one takes it over. */
  owner: string | null;
  /** The replica that created it (null before replicas): once another owns it, the creator is gone. */
  creator: string | null;
}

export type VideoState = { status: 'absent' } | ActiveVideo;

export const videoStream = (videoId: string) => streamName(VideoStreams.video, videoId);

const initialState = (): VideoState => ({ status: 'absent' });

/** What the reservation of this video still needs: nothing, a capture (completed) or a release (failed, cancelled). */
export function settlementDue(state: VideoState): 'capture' | 'release' | null {
  if (state.status === 'absent' || state.mode === 'test' || state.settled) return null;
  if (state.status === 'completed') return 'capture';
  if (state.status === 'failed' || state.status === 'rejected' || state.deleted) return 'release';
  return null;
}

/** How a recorded settlement went: the capture charged the price, or the hold was given back. */
export type SettlementOutcome = 'charged' | 'refunded';

/**
 * What the organization pays for a video, as its reads say (`x-billing`). A failed video's release and a
 * completed one's capture follow their status in the job's next step: until the capture is recorded the price
 * is still only held, whereas a failed video is never charged whatever billing has recorded yet.
 */
export function billingOf(video: { mode: 'live' | 'test'; status: VideoPhase; settlement: SettlementOutcome | null }): VideoBilling {
  if (video.mode === 'test') return 'test';
  if (video.settlement !== null) return video.settlement === 'charged' ? 'charged' : 'released';
  return video.status === 'failed' || video.status === 'rejected' ? 'released' : 'reserved';
}

export const isRunning = (state: VideoState): state is ActiveVideo =>
  state.status !== 'absent' && !state.deleted && (state.status === 'queued' || state.status === 'in_progress');

/** The spec's Events `data` (with `cost`, not `x-cost`) for the video as it is after the event. */
export function notificationData(state: ActiveVideo): VideoEventData {
  const base: VideoEventData = {
    id: state.videoId,
    object: 'video',
    created: Math.floor(state.queuedAt / 1000),
    model: state.model,
    prompt: state.prompt,
    status: state.status as VideoStatus,
    progress: state.progress,
    url: state.status === 'completed' ? state.url : null,
  };
  if (state.status === 'completed') {
    return {
      ...base,
      seconds: state.seconds,
      size: state.size,
      cost: { amount: microsToUsd(state.costMicros), currency: 'usd' },
    };
  }
  if (state.status === 'failed' && state.error) return { ...base, error: state.error };
  return base;
}

function invalidState(message: string): never {
  throw new DomainError({ kind: 'InvalidState', code: 'invalid_video_state', message });
}

function decide(command: VideoCommand, state: VideoState): VideoJobEvent[] {
  if (command.type === 'RequestVideo') {
    if (state.status !== 'absent') {
      throw new DomainError({ kind: 'Conflict', code: 'video_exists', message: `Video ${command.videoId} already exists.` });
    }
    return [
      {
        type: 'VideoRequested',
        data: {
          org_id: command.orgId,
          video_id: command.videoId,
          mode: command.mode,
          model: command.model,
          prompt: command.prompt,
          seconds: command.seconds,
          size: command.size,
          cost_micros: command.costMicros,
          remixed_from_video_id: command.remixedFromVideoId,
          input_reference: command.inputReference,
          requested_at: command.now,
          idempotency_key: command.idempotencyKey,
          request_hash: command.requestHash,
          replica: command.replica,
          ...(command.keyId !== undefined ? { key_id: command.keyId } : {}),
        },
      },
    ];
  }
  if (state.status === 'absent') throw new DomainError({ kind: 'NotFound', resource: 'video', id: 'unknown' });
  const key = { org_id: state.orgId, video_id: state.videoId };
  if (command.type === 'TakeOverJob') {
    return state.owner === command.from && command.replica !== state.owner
      ? [{ type: 'VideoJobTakenOver', data: { ...key, replica: command.replica, previous: state.owner } }]
      : [];
  }
  if (command.type !== 'DeleteVideo' && command.replica !== state.owner) throw new NotJobOwner(state.videoId, state.owner);


  // A refund is still owed after a cancelling delete or a rejection; every other command finds the video gone.
  const invisible = state.deleted || state.status === 'rejected' || state.status === 'requested';
  const duringCreate = command.type === 'AcceptVideo' || command.type === 'RejectVideo' || command.type === 'RecordSettlement';
  if (invisible && !duringCreate) throw new DomainError({ kind: 'NotFound', resource: 'video', id: state.videoId });

  switch (command.type) {
    case 'AcceptVideo':
      if (state.status === 'rejected') invalidState('A rejected video cannot be accepted.');
      return state.status === 'requested' ? [{ type: 'VideoQueued', data: key }] : [];

    case 'RejectVideo':
      return state.status === 'requested' ? [{ type: 'VideoRejected', data: { ...key, reason: command.reason } }] : [];

    case 'StartGeneration': {
      if (state.status !== 'queued') return [];
      const started: VideoEvent = {
        type: 'GenerationStarted',
        data: { ...key, provider: command.provider, upstream_id: command.upstreamId, started_at: command.now },
      };
      const next = evolve(state, started) as ActiveVideo;
      return [started, { type: 'VideoProcessing', data: { org_id: state.orgId, video: notificationData(next) } }];
    }

    case 'ReportProgress': {
      if (state.status !== 'in_progress') return [];
      const progress = Math.min(99, Math.max(1, Math.round(command.progress)));
      return progress > state.progress ? [{ type: 'VideoProgressed', data: { ...key, progress } }] : [];
    }

    case 'CompleteGeneration': {
      if (state.status === 'completed') return [];
      if (state.status !== 'in_progress') invalidState(`A ${state.status} video cannot complete.`);
      const stored: VideoEvent = { type: 'VideoStored', data: { ...key, completed_at: command.now, bytes: command.bytes } };
      const completed = { ...state, status: 'completed' as const, progress: 100, url: command.url, completedAt: command.now };
      return [stored, { type: 'VideoCompleted', data: { org_id: state.orgId, video: notificationData(completed) } }];
    }

    case 'FailGeneration': {
      if (state.status === 'failed') return [];
      if (state.status !== 'queued' && state.status !== 'in_progress') invalidState(`A ${state.status} video cannot fail.`);
      const failed = { ...state, status: 'failed' as const, error: { code: command.code, message: command.message } };
      return [{ type: 'VideoFailed', data: { org_id: state.orgId, video: notificationData(failed) } }];
    }

    case 'PersistVideo':
      if (state.status !== 'completed' || state.persisted || state.expired) return [];
      return [{ type: 'VideoPersisted', data: { ...key, persisted_at: command.now, url: command.url } }];

    case 'ExpireVideo':
      if (state.status !== 'completed' || state.persisted || state.expired) return [];
      return [{ type: 'VideoExpired', data: { ...key, expired_at: command.now } }];

    case 'RecordSettlement': {
      const due = settlementDue(state);
      const wanted = command.outcome === 'refunded' ? 'release' : 'capture';
      if (due !== wanted) return [];
      return command.outcome === 'charged'
        ? [{ type: 'VideoCharged', data: { ...key, amount_micros: state.costMicros } }]
        : [{ type: 'VideoRefunded', data: { ...key, amount_micros: state.costMicros } }];
    }

    case 'DeleteVideo':
      return [{ type: 'VideoDeleted', data: { ...key, deleted_at: command.now } }];

    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: VideoState, event: VideoJobEvent): VideoState {
  if (event.type === 'VideoRequested') {
    const d = event.data;
    return {
      status: 'requested',
      orgId: d.org_id,
      videoId: d.video_id,
      mode: d.mode,
      keyId: d.key_id ?? null,
      model: d.model,
      prompt: d.prompt,
      seconds: d.seconds,
      size: d.size,
      costMicros: d.cost_micros,
      remixedFromVideoId: d.remixed_from_video_id,
      inputReference: d.input_reference ?? null,
      queuedAt: d.requested_at,
      progress: 0,
      url: null,
      error: null,
      upstream: null,
      completedAt: null,
      persisted: false,
      expired: false,
      settled: false,
      deleted: false,
      owner: d.replica ?? null,
      creator: d.replica ?? null,
    };
  }
  if (state.status === 'absent') return state;
  switch (event.type) {
    case 'VideoJobTakenOver':
      return { ...state, owner: event.data.replica };
    case 'VideoQueued':
      return { ...state, status: 'queued' };
    case 'VideoRejected':
      // After a 402 nothing was held, so nothing is left to settle.
      return { ...state, status: 'rejected', settled: event.data.reason === 'insufficient_quota' };
    case 'GenerationStarted':
      return {
        ...state,
        status: 'in_progress',
        progress: Math.max(1, state.progress),
        upstream: { provider: event.data.provider, id: event.data.upstream_id, startedAt: event.data.started_at },
      };
    case 'VideoProcessing':
      return state;
    case 'VideoProgressed':
      return { ...state, progress: Math.max(state.progress, event.data.progress) };
    case 'VideoStored':
      return { ...state, completedAt: event.data.completed_at };
    case 'VideoCompleted':
      return { ...state, status: 'completed', progress: 100, url: event.data.video.url };
    case 'VideoFailed': {
      const error = event.data.video.error;
      return { ...state, status: 'failed', error: error ? { code: error.code as VideoFailureCode, message: error.message } : null };
    }
    case 'VideoPersisted':
      return { ...state, persisted: true, url: event.data.url };
    case 'VideoExpired':
      return { ...state, expired: true };
    case 'VideoCharged':
    case 'VideoRefunded':
      return { ...state, settled: true };
    case 'VideoDeleted':
      return { ...state, deleted: true };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const videoDecider = { decide, evolve, initialState };
