import type { VideoFailureCode, VideoModel, VideoSeconds, VideoSize } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';
import type { SettlementOutcome, VideoPhase } from '../domain/video';

export interface VideoDoc {
  _id: string;
  org_id: string;
  mode: 'live' | 'test';
  model: VideoModel;
  prompt: string;
  seconds: VideoSeconds;
  size: VideoSize;
  status: VideoPhase;
  progress: number;
  url: string | null;
  error: { code: VideoFailureCode; message: string } | null;
  cost_micros: number;
  remixed_from_video_id: string | null;
  /** Unix seconds (the resource's `created`) and milliseconds (ordering, idempotency window). */
  created: number;
  queued_at: number;
  completed_at: number | null;
  persisted: boolean;
  expired: boolean;
  deleted: boolean;
  settled: boolean;
  /** How the settlement went, once recorded (absent on documents projected before it was kept). */
  settlement?: SettlementOutcome | null;
  idempotency_key: string | null;
  request_hash: string | null;
  /** Something is still to be done for this video: generation, settlement, persistence or expiry. */
  open: boolean;
  /** The replica that runs the job (absent or null on videos from before replicas). */
  owner?: string | null;
  /** The deployment generating it, once submitted (absent on documents projected before it was kept). */
  deployment?: string | null;
  [key: string]: unknown;
}

export const Collections = {
  videos: 'video_videos',
} as const;

/**
 * An organization's videos newest first, the latest video under an idempotency key, the unfinished ones at
 * start, and the replicas that run unfinished ones (with each replica's, when one is gone).
 */
export const videoCollections: CollectionSpec[] = [
  { name: Collections.videos, indexes: [['org_id', 'queued_at'], ['org_id', 'idempotency_key', 'queued_at'], ['open'], ['open', 'owner']] },
];
