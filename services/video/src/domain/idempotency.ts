import { createHash } from 'node:crypto';
import { streamName, type VideoEvent, VideoStreams } from '@oc/contracts';

/**
 * An organization's Idempotency-Key in one mode (stream `videokey-<hash of organization, mode and key>`):
 * which video it stands for. Live and test keys of one organization each have their own, so that a test
 * key never gets a live video (nor a live key a simulated one) by reusing a key. The stream is the guard across replicas: two requests racing on one key both append a claim
 * with the revision they read, one wins, and the other finds the winner's video in the state it is told.
 */
export type IdempotencyKeyEvent = Extract<VideoEvent, { type: 'VideoIdempotencyKeyClaimed' }>;

export type IdempotencyKeyState =
  | { status: 'unclaimed' }
  | { status: 'claimed'; videoId: string; requestHash: string; claimedAt: number };

export interface ClaimIdempotencyKey {
  type: 'ClaimIdempotencyKey';
  orgId: string;
  /** The video this request would create. */
  videoId: string;
  requestHash: string;
  now: number;
  /** How long a claim stands (Stripe's 24 hours). */
  windowMs: number;
  /** The video of an earlier claim that was never accepted (refused for funds, abandoned): replace it. */
  replacing: string | null;
}

export const idempotencyKeyStream = (orgId: string, mode: 'live' | 'test', key: string) =>
  streamName(VideoStreams.idempotencyKey, createHash('sha256').update(JSON.stringify([orgId, mode, key])).digest('hex'));

function decide(command: ClaimIdempotencyKey, state: IdempotencyKeyState): IdempotencyKeyEvent[] {
  const free =
    state.status === 'unclaimed' ||
    command.now >= state.claimedAt + command.windowMs ||
    (command.replacing !== null && command.replacing === state.videoId);
  if (!free) return [];
  return [
    {
      type: 'VideoIdempotencyKeyClaimed',
      data: { org_id: command.orgId, video_id: command.videoId, request_hash: command.requestHash, claimed_at: command.now },
    },
  ];
}

function evolve(_state: IdempotencyKeyState, event: IdempotencyKeyEvent): IdempotencyKeyState {
  return { status: 'claimed', videoId: event.data.video_id, requestHash: event.data.request_hash, claimedAt: event.data.claimed_at };
}

export const idempotencyKeyDecider = { decide, evolve, initialState: (): IdempotencyKeyState => ({ status: 'unclaimed' }) };
