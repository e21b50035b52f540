import { DomainError, toApiError, VideoNotifications } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { videoPriceMicros, DEFAULT_PRICES } from '../src/domain/pricing';
import { violatesContentPolicy } from '../src/domain/content-policy';
import { NotJobOwner, type VideoCommand, videoDecider } from '../src/domain/video';
import { type ClaimIdempotencyKey, idempotencyKeyDecider, idempotencyKeyStream } from '../src/domain/idempotency';
import type { VideoJobEvent as VideoEvent } from '../src/domain/video';

const spec = deciderSpec(videoDecider);
const key = { org_id: 'org_1', video_id: 'video_1' };
const T0 = 1_767_225_600_000;
const URL = 'http://api.test/v1/videos/video_1/content';
/** The replica that creates and runs the video. */
const R = 'video-a';

const queue = (mode: 'live' | 'test' = 'live'): VideoCommand => ({
  type: 'RequestVideo',
  orgId: 'org_1',
  videoId: 'video_1',
  mode,
  model: 'video-2',
  prompt: 'A calm lake at dawn',
  seconds: '4',
  size: '1280x720',
  costMicros: 400_000,
  remixedFromVideoId: null,
  inputReference: null,
  idempotencyKey: null,
  requestHash: null,
  now: T0,
  replica: R,
});

function history(...commands: VideoCommand[]): VideoEvent[] {
  const events: VideoEvent[] = [];
  for (const command of commands) {
    const result = spec.given(events).when(command);
    if ('error' in result) throw result.error;
    events.push(...result.events);
  }
  return events;
}

const accept: VideoCommand = { type: 'AcceptVideo', replica: R };
const start: VideoCommand = { type: 'StartGeneration', replica: R, provider: 'simulator', upstreamId: 'sim_1', now: T0 + 10 };
const progress = (p: number): VideoCommand => ({ type: 'ReportProgress', replica: R, progress: p });
const complete: VideoCommand = { type: 'CompleteGeneration', replica: R, bytes: 1234, url: URL, now: T0 + 20_000 };
const fail = (code: 'timeout' | 'generation_failed' = 'generation_failed'): VideoCommand => ({
  type: 'FailGeneration',
  replica: R,
  code,
  message: 'boom',
});

const codeOf = (result: { error: unknown } | { events: VideoEvent[] }) => {
  if (!('error' in result)) throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error).code;
};

describe('video decider', () => {
  it('records a request, queues it once its funds are held, and refuses to request the same id twice', () => {
    const result = spec.given([]).when(queue());
    expect(result).toEqual({
      events: [expect.objectContaining({ type: 'VideoRequested', data: expect.objectContaining({ ...key, requested_at: T0, cost_micros: 400_000 }) })],
    });
    const requested = (result as { events: VideoEvent[] }).events;
    expect(spec.given(requested).when(accept)).toEqual({ events: [{ type: 'VideoQueued', data: key }] });
    expect(spec.given(history(queue(), accept)).when(accept)).toEqual({ events: [] });
    expect(codeOf(spec.given(history(queue(), accept)).when(queue()))).toBe('video_exists');
  });

  it('keeps a request billing refused invisible with nothing to settle, and releases an abandoned one', () => {
    const refused = history(queue(), { type: 'RejectVideo', replica: R, reason: 'insufficient_quota' });
    expect(spec.given(refused).when({ type: 'RecordSettlement', replica: R, outcome: 'refunded' })).toEqual({ events: [] });
    expect(codeOf(spec.given(refused).when({ type: 'DeleteVideo', now: T0 }))).toBe('video_not_found');
    expect(codeOf(spec.given(refused).when(accept))).toBe('invalid_video_state');
    const abandoned = history(queue(), { type: 'RejectVideo', replica: R, reason: 'abandoned' });
    expect(spec.given(abandoned).when({ type: 'RecordSettlement', replica: R, outcome: 'refunded' })).toEqual({
      events: [{ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } }],
    });
    expect(codeOf(spec.given(history(queue())).when(start))).toBe('video_not_found');
  });

  it('starts generation from queued with a video.processing notification carrying the spec data', () => {
    const result = spec.given(history(queue(), accept)).when(start);
    if (!('events' in result)) throw result.error;
    expect(result.events.map((e) => e.type)).toEqual(['GenerationStarted', 'VideoProcessing']);
    const processing = result.events[1]!;
    expect(VideoNotifications.VideoProcessing.parse(processing.data)).toEqual(processing.data);
    expect(processing.data).toEqual({
      org_id: 'org_1',
      video: {
        id: 'video_1',
        object: 'video',
        created: Math.floor(T0 / 1000),
        model: 'video-2',
        prompt: 'A calm lake at dawn',
        status: 'in_progress',
        progress: 1,
        url: null,
      },
    });
    // Starting twice (a step repeated after a crash) adds nothing.
    expect(spec.given(history(queue(), accept, start)).when(start)).toEqual({ events: [] });
  });

  it('never lets progress decrease and keeps it within 1-99 while in progress', () => {
    const given = history(queue(), accept, start, progress(40));
    expect(spec.given(given).when(progress(30))).toEqual({ events: [] });
    expect(spec.given(given).when(progress(40))).toEqual({ events: [] });
    expect(spec.given(given).when(progress(150))).toEqual({ events: [{ type: 'VideoProgressed', data: { ...key, progress: 99 } }] });
    expect(spec.given(history(queue(), accept)).when(progress(50))).toEqual({ events: [] });
  });

  it('completes an in-progress video with progress 100, a url and the cost in video.completed', () => {
    const result = spec.given(history(queue(), accept, start, progress(60))).when(complete);
    expect(result).toEqual({
      events: [
        { type: 'VideoStored', data: { ...key, completed_at: T0 + 20_000, bytes: 1234 } },
        {
          type: 'VideoCompleted',
          data: {
            org_id: 'org_1',
            video: {
              id: 'video_1',
              object: 'video',
              created: Math.floor(T0 / 1000),
              model: 'video-2',
              prompt: 'A calm lake at dawn',
              status: 'completed',
              progress: 100,
              url: URL,
              seconds: '4',
              size: '1280x720',
              cost: { amount: 0.4, currency: 'usd' },
            },
          },
        },
      ],
    });
  });

  it('cannot complete a video that never started, nor fail a completed one', () => {
    expect(codeOf(spec.given(history(queue(), accept)).when(complete))).toBe('invalid_video_state');
    expect(codeOf(spec.given(history(queue(), accept, start, complete)).when(fail()))).toBe('invalid_video_state');
  });

  it.each([
    ['queued', [] as VideoCommand[], 0],
    ['in_progress', [start, progress(45)], 45],
  ])('fails from %s keeping the last progress, with url null and the error in video.failed', (_, steps, kept) => {
    const result = spec.given(history(queue(), accept, ...steps)).when(fail('timeout'));
    expect(result).toEqual({
      events: [
        {
          type: 'VideoFailed',
          data: {
            org_id: 'org_1',
            video: expect.objectContaining({ status: 'failed', progress: kept, url: null, error: { code: 'timeout', message: 'boom' } }),
          },
        },
      ],
    });
  });

  it('captures a completed live video once, releases a failed one once, and settles nothing for test keys', () => {
    const completed = history(queue(), accept, start, complete);
    expect(spec.given(completed).when({ type: 'RecordSettlement', replica: R, outcome: 'refunded' })).toEqual({ events: [] });
    expect(spec.given(completed).when({ type: 'RecordSettlement', replica: R, outcome: 'charged' })).toEqual({
      events: [{ type: 'VideoCharged', data: { ...key, amount_micros: 400_000 } }],
    });
    // Billing let the hold expire before the capture: the completed video is recorded as given back, so its
    // settlement is no longer due (it was retried at every step, for ever).
    const lapsed = history(queue(), accept, start, complete, { type: 'RecordSettlement', replica: R, outcome: 'lapsed' });
    expect(lapsed.at(-1)).toEqual({ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } });
    expect(spec.given(lapsed).when({ type: 'RecordSettlement', replica: R, outcome: 'charged' })).toEqual({ events: [] });
    expect(spec.given(history(queue(), accept, start, fail())).when({ type: 'RecordSettlement', replica: R, outcome: 'lapsed' })).toEqual({ events: [] });
    const charged = history(queue(), accept, start, complete, { type: 'RecordSettlement', replica: R, outcome: 'charged' });
    expect(spec.given(charged).when({ type: 'RecordSettlement', replica: R, outcome: 'charged' })).toEqual({ events: [] });

    const failed = history(queue(), accept, start, fail());
    expect(spec.given(failed).when({ type: 'RecordSettlement', replica: R, outcome: 'refunded' })).toEqual({
      events: [{ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } }],
    });
    expect(spec.given(history(queue('test'), accept, start, complete)).when({ type: 'RecordSettlement', replica: R, outcome: 'charged' })).toEqual({
      events: [],
    });
  });

  it('cancels a running video on delete: the reservation is still released, everything else is 404', () => {
    const deleted = history(queue(), accept, start, { type: 'DeleteVideo', now: T0 + 5 });
    expect(spec.given(deleted).when({ type: 'RecordSettlement', replica: R, outcome: 'refunded' })).toEqual({
      events: [{ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } }],
    });
    expect(codeOf(spec.given(deleted).when(progress(50)))).toBe('video_not_found');
    expect(codeOf(spec.given(deleted).when({ type: 'DeleteVideo', now: T0 + 6 }))).toBe('video_not_found');
  });

  it('persists a completed video once, and not after it expired', () => {
    const completed = history(queue(), accept, start, complete);
    const persist: VideoCommand = { type: 'PersistVideo', replica: R, url: URL, now: T0 + 100 };
    expect(spec.given(completed).when(persist)).toEqual({
      events: [{ type: 'VideoPersisted', data: { ...key, persisted_at: T0 + 100, url: URL } }],
    });
    expect(spec.given(history(queue(), accept, start, complete, persist)).when(persist)).toEqual({ events: [] });
    const expired = history(queue(), accept, start, complete, { type: 'ExpireVideo', replica: R, now: T0 + 200 });
    expect(spec.given(expired).when(persist)).toEqual({ events: [] });
    expect(spec.given(history(queue(), accept, start)).when(persist)).toEqual({ events: [] });
  });

  it('takes job steps only from the replica that runs the video, and hands the job over once', () => {
    const running = history(queue(), accept, start);
    const elsewhere = spec.given(running).when({ type: 'ReportProgress', replica: 'video-b', progress: 50 });
    expect('error' in elsewhere && elsewhere.error).toBeInstanceOf(NotJobOwner);
    // Anyone's client may delete it.
    expect(spec.given(running).when({ type: 'DeleteVideo', now: T0 + 1 })).toEqual({ events: [{ type: 'VideoDeleted', data: { ...key, deleted_at: T0 + 1 } }] });

    const takeover: VideoCommand = { type: 'TakeOverJob', replica: 'video-b', from: R };
    expect(spec.given(running).when(takeover)).toEqual({
      events: [{ type: 'VideoJobTakenOver', data: { ...key, replica: 'video-b', previous: R } }],
    });
    const taken = history(queue(), accept, start, takeover);
    // A second replica that also saw the owner gone, deciding after the first: nothing.
    expect(spec.given(taken).when({ type: 'TakeOverJob', replica: 'video-c', from: R })).toEqual({ events: [] });
    expect(spec.given(taken).when({ type: 'ReportProgress', replica: 'video-b', progress: 50 })).toEqual({
      events: [{ type: 'VideoProgressed', data: { ...key, progress: 50 } }],
    });
    const former = spec.given(taken).when({ type: 'ReportProgress', replica: R, progress: 60 });
    expect('error' in former && former.error).toBeInstanceOf(NotJobOwner);
  });

  it('lets a replica take over a video written before replicas, which names no owner', () => {
    const { replica: _, ...legacy } = (history(queue())[0] as Extract<VideoEvent, { type: 'VideoRequested' }>).data;
    const old: VideoEvent[] = [{ type: 'VideoRequested', data: legacy }, { type: 'VideoQueued', data: key }];
    const step = spec.given(old).when(start);
    expect('error' in step && step.error).toBeInstanceOf(NotJobOwner);
    expect(spec.given(old).when({ type: 'TakeOverJob', replica: R, from: null })).toEqual({
      events: [{ type: 'VideoJobTakenOver', data: { ...key, replica: R, previous: null } }],
    });
  });
});

describe('Idempotency-Key claims', () => {
  const keySpec = deciderSpec(idempotencyKeyDecider);
  const claim = (videoId: string, overrides: Partial<ClaimIdempotencyKey> = {}): ClaimIdempotencyKey => ({
    type: 'ClaimIdempotencyKey',
    orgId: 'org_1',
    videoId,
    requestHash: 'hash-1',
    now: T0,
    windowMs: 86_400_000,
    replacing: null,
    ...overrides,
  });
  const claimed = (videoId: string, at = T0) => ({
    type: 'VideoIdempotencyKeyClaimed' as const,
    data: { org_id: 'org_1', video_id: videoId, request_hash: 'hash-1', claimed_at: at },
  });

  it('gives a key to the first request, and to nobody else for 24 hours', () => {
    expect(keySpec.given([]).when(claim('video_1'))).toEqual({ events: [claimed('video_1')] });
    expect(keySpec.given([claimed('video_1')]).when(claim('video_2', { now: T0 + 86_399_999 }))).toEqual({ events: [] });
    expect(keySpec.given([claimed('video_1')]).when(claim('video_2', { now: T0 + 86_400_000 }))).toEqual({
      events: [claimed('video_2', T0 + 86_400_000)],
    });
  });

  it('passes a key on only in place of the video the caller saw refused', () => {
    expect(keySpec.given([claimed('video_1')]).when(claim('video_2', { replacing: 'video_1' }))).toEqual({ events: [claimed('video_2')] });
    expect(keySpec.given([claimed('video_1'), claimed('video_2')]).when(claim('video_3', { replacing: 'video_1' }))).toEqual({ events: [] });
  });

  it('names one stream per organization, mode and key, whatever the key holds', () => {
    expect(idempotencyKeyStream('org_1', 'live', 'k')).toMatch(/^videokey-[0-9a-f]{64}$/);
    expect(idempotencyKeyStream('org_1', 'live', 'k')).not.toBe(idempotencyKeyStream('org_2', 'live', 'k'));
    expect(idempotencyKeyStream('org_1', 'live', 'k')).not.toBe(idempotencyKeyStream('org_1', 'test', 'k'));
    expect(idempotencyKeyStream('org_1', 'live', 'a\nb')).not.toBe(idempotencyKeyStream('org_1\na', 'live', 'b'));
  });
});

describe('pricing', () => {
  it.each([
    ['video-2', '1280x720', '4', 400_000],
    ['video-2', '1792x1024', '12', 1_200_000],
    ['video-2-pro', '720x1280', '8', 2_400_000],
    ['video-2-pro', '1024x1792', '12', 6_000_000],
  ] as const)('prices %s at %s for %s s at %i micro-USD', (model, size, seconds, micros) => {
    expect(videoPriceMicros(DEFAULT_PRICES, model, size, seconds)).toBe(micros);
  });
});

describe('content policy', () => {
  it('refuses clear violations and lets ordinary prompts through', () => {
    expect(violatesContentPolicy('explicit nude images of children playing')).toBe(true);
    expect(violatesContentPolicy('A kid flying a kite on a sunny beach')).toBe(false);
  });
});
