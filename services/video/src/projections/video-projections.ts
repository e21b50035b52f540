import { documentProjection } from '@oc/readmodel';
import { type ActiveVideo, settlementDue, videoDecider, type VideoJobEvent } from '../domain/video';
import { Collections, type VideoDoc } from './documents';

/** The open/closed question is the decider's, so the projection folds the same evolve into a document. */
function toDoc(state: ActiveVideo, doc: VideoDoc | null): VideoDoc {
  const open =
    settlementDue(state) !== null ||
    state.status === 'requested' ||
    (!state.deleted && (state.status === 'queued' || state.status === 'in_progress')) ||
    (!state.deleted && state.status === 'completed' && !state.persisted && !state.expired);
  return {
    _id: state.videoId,
    org_id: state.orgId,
    mode: state.mode,
    model: state.model,
    prompt: state.prompt,
    seconds: state.seconds,
    size: state.size,
    status: state.status,
    progress: state.progress,
    url: state.url,
    error: state.error,
    cost_micros: state.costMicros,
    remixed_from_video_id: state.remixedFromVideoId,
    created: Math.floor(state.queuedAt / 1000),
    queued_at: state.queuedAt,
    completed_at: state.completedAt,
    persisted: state.persisted,
    expired: state.expired,
    deleted: state.deleted,
    settled: state.settled,
    settlement: doc?.settlement ?? null,
    idempotency_key: doc?.idempotency_key ?? null,
    request_hash: doc?.request_hash ?? null,
    open,
    owner: state.owner,
    // The document's state has no upstream (`fromDoc`): the deployment is kept from the event that named it.
    deployment: state.upstream?.provider ?? doc?.deployment ?? null,
  };
}

function fromDoc(doc: VideoDoc): ActiveVideo {
  return {
    status: doc.status,
    orgId: doc.org_id,
    videoId: doc._id,
    mode: doc.mode,
    // Not kept in the document: only the job's capture, which reads the stream, needs it.
    keyId: null,
    model: doc.model,
    prompt: doc.prompt,
    seconds: doc.seconds,
    size: doc.size,
    costMicros: doc.cost_micros,
    remixedFromVideoId: doc.remixed_from_video_id,
    // Not kept in the document: only the job, which reads the stream, needs it.
    inputReference: null,
    queuedAt: doc.queued_at,
    progress: doc.progress,
    url: doc.url,
    error: doc.error,
    upstream: null,
    completedAt: doc.completed_at,
    persisted: doc.persisted,
    expired: doc.expired,
    settled: doc.settled,
    deleted: doc.deleted,
    owner: doc.owner ?? null,
    // Not kept in the document: nothing the document shows depends on it.
    creator: null,
  };
}

export const videosProjection = documentProjection<VideoDoc>({
  name: 'video-videos',
  collection: Collections.videos,
  canHandle: [
    'VideoRequested',
    'VideoQueued',
    'VideoRejected',
    'GenerationStarted',
    'VideoProgressed',
    'VideoStored',
    'VideoCompleted',
    'VideoFailed',
    'VideoPersisted',
    'VideoExpired',
    'VideoCharged',
    'VideoRefunded',
    'VideoDeleted',
    'VideoJobTakenOver',
  ],
  documentId: (event) => {
    const data = event.data as { video_id?: string; video?: { id: string } };
    return data.video_id ?? data.video?.id ?? null;
  },
  evolve(doc, stored) {
    const event = stored as unknown as VideoJobEvent;
    if (event.type === 'VideoRequested') {
      const state = videoDecider.evolve(videoDecider.initialState(), event) as ActiveVideo;
      return toDoc(state, { idempotency_key: event.data.idempotency_key, request_hash: event.data.request_hash } as VideoDoc);
    }
    if (!doc) return null;
    const next = toDoc(videoDecider.evolve(fromDoc(doc), event) as ActiveVideo, doc);
    // The decider's state knows only that the reservation was settled; a read tells which way it went.
    if (event.type === 'VideoCharged') next.settlement = 'charged';
    if (event.type === 'VideoRefunded') next.settlement = 'refunded';
    return next;
  },
});

export const videoProjections = [videosProjection];
