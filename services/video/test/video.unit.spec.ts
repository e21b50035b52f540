import { DomainError, toApiError, VideoNotifications } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { videoPriceMicros, DEFAULT_PRICES } from '../src/domain/pricing';
import { violatesContentPolicy } from '../src/domain/content-policy';
import { type VideoCommand, videoDecider } from '../src/domain/video';
import type { VideoEvent } from '@oc/contracts';

const spec = deciderSpec(videoDecider);
const key = { org_id: 'org_1', video_id: 'video_1' };
const T0 = 1_767_225_600_000;
const URL = 'http://api.test/v1/videos/video_1/content';

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
  idempotencyKey: null,
  requestHash: null,
  now: T0,
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

const accept: VideoCommand = { type: 'AcceptVideo' };
const start: VideoCommand = { type: 'StartGeneration', provider: 'simulator', upstreamId: 'sim_1', now: T0 + 10 };
const progress = (p: number): VideoCommand => ({ type: 'ReportProgress', progress: p });
const complete: VideoCommand = { type: 'CompleteGeneration', bytes: 1234, url: URL, now: T0 + 20_000 };
const fail = (code: 'timeout' | 'generation_failed' = 'generation_failed'): VideoCommand => ({
  type: 'FailGeneration',
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
    const refused = history(queue(), { type: 'RejectVideo', reason: 'insufficient_quota' });
    expect(spec.given(refused).when({ type: 'RecordSettlement', outcome: 'refunded' })).toEqual({ events: [] });
    expect(codeOf(spec.given(refused).when({ type: 'DeleteVideo', now: T0 }))).toBe('video_not_found');
    expect(codeOf(spec.given(refused).when(accept))).toBe('invalid_video_state');
    const abandoned = history(queue(), { type: 'RejectVideo', reason: 'abandoned' });
    expect(spec.given(abandoned).when({ type: 'RecordSettlement', outcome: 'refunded' })).toEqual({
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
    expect(spec.given(completed).when({ type: 'RecordSettlement', outcome: 'refunded' })).toEqual({ events: [] });
    expect(spec.given(completed).when({ type: 'RecordSettlement', outcome: 'charged' })).toEqual({
      events: [{ type: 'VideoCharged', data: { ...key, amount_micros: 400_000 } }],
    });
    const charged = history(queue(), accept, start, complete, { type: 'RecordSettlement', outcome: 'charged' });
    expect(spec.given(charged).when({ type: 'RecordSettlement', outcome: 'charged' })).toEqual({ events: [] });

    const failed = history(queue(), accept, start, fail());
    expect(spec.given(failed).when({ type: 'RecordSettlement', outcome: 'refunded' })).toEqual({
      events: [{ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } }],
    });
    expect(spec.given(history(queue('test'), accept, start, complete)).when({ type: 'RecordSettlement', outcome: 'charged' })).toEqual({
      events: [],
    });
  });

  it('cancels a running video on delete: the reservation is still released, everything else is 404', () => {
    const deleted = history(queue(), accept, start, { type: 'DeleteVideo', now: T0 + 5 });
    expect(spec.given(deleted).when({ type: 'RecordSettlement', outcome: 'refunded' })).toEqual({
      events: [{ type: 'VideoRefunded', data: { ...key, amount_micros: 400_000 } }],
    });
    expect(codeOf(spec.given(deleted).when(progress(50)))).toBe('video_not_found');
    expect(codeOf(spec.given(deleted).when({ type: 'DeleteVideo', now: T0 + 6 }))).toBe('video_not_found');
  });

  it('persists a completed video once, and not after it expired', () => {
    const completed = history(queue(), accept, start, complete);
    const persist: VideoCommand = { type: 'PersistVideo', url: URL, now: T0 + 100 };
    expect(spec.given(completed).when(persist)).toEqual({
      events: [{ type: 'VideoPersisted', data: { ...key, persisted_at: T0 + 100, url: URL } }],
    });
    expect(spec.given(history(queue(), accept, start, complete, persist)).when(persist)).toEqual({ events: [] });
    const expired = history(queue(), accept, start, complete, { type: 'ExpireVideo', now: T0 + 200 });
    expect(spec.given(expired).when(persist)).toEqual({ events: [] });
    expect(spec.given(history(queue(), accept, start)).when(persist)).toEqual({ events: [] });
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
