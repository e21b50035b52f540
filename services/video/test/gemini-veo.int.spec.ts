import { ProviderError } from '@oc/routing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GeminiVeoProvider, type GeminiVeoVideoOptions } from '../src/adapters/gemini-veo';
import { GEMINI_VEO_VIDEO_DEFAULTS, geminiVeoVideoCapabilities } from '../src/adapters/gemini-veo-models';
import type { GenerationJob, StartedGeneration } from '../src/application/ports';
import { type FakeGeminiVeo, startFakeGeminiVeo, type VeoOutcome } from './fakes/gemini-veo';

const API_KEY = 'AIzaSy-test-key-0123456789';
const MODEL = 'veo-3.1-fast-generate-preview';
const T0 = Date.UTC(2026, 10, 27, 12);
const MP4 = Buffer.from('fake-mp4');

const job = (overrides: Partial<GenerationJob> = {}): GenerationJob => ({
  videoId: 'video_1',
  model: 'video-2',
  prompt: 'A lighthouse in a storm at night',
  seconds: '8',
  size: '1280x720',
  ...overrides,
});

/** The thrown ProviderError, checked never to carry the key in what it says. */
async function providerError(promise: Promise<unknown>, key = API_KEY): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  const providerError = error as ProviderError;
  expect(`${providerError.message} ${providerError.detail}`).not.toContain(key);
  return providerError;
}

describe('GeminiVeoProvider against a fake Gemini API, through @google/genai', () => {
  let fake: FakeGeminiVeo;
  const provider = (overrides: Partial<GeminiVeoVideoOptions> = {}) =>
    new GeminiVeoProvider({ apiKey: API_KEY, baseUrl: fake.baseUrl, model: MODEL, pollIntervalMs: 10_000, requestTimeoutMs: 2_000, ...overrides });
  const startWith = async (outcome: VeoOutcome) => {
    fake.setOutcome(outcome);
    const started = await provider().start(job(), T0);
    if ('status' in started) throw new Error('the fake refused the job');
    return started;
  };

  beforeEach(async () => {
    fake = await startFakeGeminiVeo(API_KEY, MP4);
  });
  afterEach(() => fake.close());

  it.each([
    { seconds: '4', size: '1280x720', durationSeconds: 4, aspectRatio: '16:9', resolution: '720p' },
    { seconds: '8', size: '1280x720', durationSeconds: 8, aspectRatio: '16:9', resolution: '720p' },
    { seconds: '4', size: '720x1280', durationSeconds: 4, aspectRatio: '9:16', resolution: '720p' },
    { seconds: '8', size: '720x1280', durationSeconds: 8, aspectRatio: '9:16', resolution: '720p' },
    { seconds: '8', size: '1792x1024', durationSeconds: 8, aspectRatio: '16:9', resolution: '1080p' },
    { seconds: '8', size: '1024x1792', durationSeconds: 8, aspectRatio: '9:16', resolution: '1080p' },
  ] as const)('asks Veo for $seconds s at $size as $aspectRatio $resolution', async ({ seconds, size, durationSeconds, aspectRatio, resolution }) => {
    const started = await provider().start(job({ seconds, size }), T0);

    expect(started).toEqual({ upstreamId: `models/${MODEL}/operations/op1`, startedAt: T0 });
    const [request] = fake.requests;
    expect(request).toMatchObject({ method: 'POST', path: `/v1beta/models/${MODEL}:predictLongRunning`, query: '' });
    expect(request!.headers['x-goog-api-key']).toBe(API_KEY);
    expect(request!.body).toEqual({
      instances: [{ prompt: 'A lighthouse in a storm at night' }],
      parameters: { aspectRatio, resolution, durationSeconds, sampleCount: 1 },
    });
  });

  it('starts from an input_reference image, sent inline as instances[0].image with its type', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const started = await provider().start(job({ image: { data: png, contentType: 'image/png' } }), T0);
    expect(started).toEqual({ upstreamId: `models/${MODEL}/operations/op1`, startedAt: T0 });
    expect(fake.requests[0]!.body).toMatchObject({
      instances: [{ prompt: 'A lighthouse in a storm at night', image: { bytesBase64Encoded: png.toString('base64'), mimeType: 'image/png' } }],
    });
    // Without one, the instance is the prompt alone.
    await provider().start(job(), T0);
    expect(fake.requests[1]!.body).toMatchObject({ instances: [{ prompt: 'A lighthouse in a storm at night' }] });
    expect((fake.requests[1]!.body as { instances: object[] }).instances[0]).not.toHaveProperty('image');
  });

  it('reports rising progress while the operation runs, then completion, then the very bytes the provider served', async () => {
    const p = provider();
    const started = await startWith({ kind: 'video', polls: 2 });

    expect(p.nextPollAt(job(), started, T0)).toBe(T0 + 10_000);
    const first = await p.poll(job(), started, T0 + 10_000);
    const second = await p.poll(job(), started, T0 + 60_000);
    expect(first).toMatchObject({ status: 'in_progress' });
    expect(second).toMatchObject({ status: 'in_progress' });
    const [early, later] = [first, second].map((s) => (s.status === 'in_progress' ? s.progress : NaN));
    expect(early).toBeGreaterThanOrEqual(1);
    expect(later).toBeGreaterThan(early!);
    expect(later).toBeLessThan(100);
    expect(await p.poll(job(), started, T0 + 90_000)).toEqual({ status: 'completed' });

    const video = await p.download(job(), started);
    expect(video.kind === 'bytes' && video.video.equals(MP4)).toBe(true);
    expect(fake.requests.map((r) => `${r.method} ${r.path}${r.query}`)).toEqual([
      `POST /v1beta/models/${MODEL}:predictLongRunning`,
      ...Array(4).fill(`GET /v1beta/models/${MODEL}/operations/op1`),
      'GET /v1beta/files/file1:download?alt=media',
    ]);
    expect(fake.requests.every((r) => r.headers['x-goog-api-key'] === API_KEY)).toBe(true);
  });

  it('polls and downloads from the upstreamId alone, in a new adapter instance (after a restart)', async () => {
    const { upstreamId } = await startWith({ kind: 'video', polls: 0 });
    const restarted = provider();
    const started: StartedGeneration = { upstreamId, startedAt: T0 };

    expect(await restarted.poll(job(), started, T0 + 30_000)).toEqual({ status: 'completed' });
    const video = await restarted.download(job(), started);
    expect(video.kind === 'bytes' && video.video.equals(MP4)).toBe(true);
  });

  it.each([
    { what: 'a failed operation', outcome: { kind: 'failed', polls: 0, code: 13, message: 'Internal error encountered.' }, code: 'generation_failed' },
    {
      what: 'an operation stopped by the safety filters',
      outcome: { kind: 'failed', polls: 0, code: 3, message: "The prompt may violate Google's Responsible AI practices." },
      code: 'content_policy_violation',
    },
    { what: 'an operation past its deadline', outcome: { kind: 'failed', polls: 0, code: 4, message: 'Deadline expired before operation could complete.' }, code: 'timeout' },
    {
      what: 'output filtered by Responsible AI',
      outcome: { kind: 'filtered', polls: 0, reasons: ['Video was filtered because it depicts a real person.'] },
      code: 'content_policy_violation',
    },
  ] as const)('fails the job on $what with $code and a message of our own', async ({ outcome, code }) => {
    const started = await startWith(outcome);

    const status = await provider().poll(job(), started, T0 + 30_000);

    expect(status).toMatchObject({ status: 'failed', code });
    const message = status.status === 'failed' ? status.message : '';
    expect(message).not.toBe('');
    expect(message).not.toMatch(/internal error|responsible ai|real person|deadline expired/i);
  });

  it('fails the job with content_policy_violation when Google refuses the prompt at submission, without throwing', async () => {
    fake.fail('submit', { kind: 'status', status: 400, statusText: 'INVALID_ARGUMENT', message: "The prompt violates Google's Responsible AI practices." });

    const result = await provider().start(job(), T0);

    expect(result).toMatchObject({ status: 'failed', code: 'content_policy_violation' });
    expect(JSON.stringify(result)).not.toContain('Responsible AI');
  });

  it('throws a request error for any other 400 at submission, with Google’s words only in the detail', async () => {
    fake.fail('submit', { kind: 'status', status: 400, statusText: 'INVALID_ARGUMENT', message: 'Request contains an invalid argument.' });

    const error = await providerError(provider().start(job(), T0));

    expect(error).toMatchObject({ kind: 'request', status: 400, message: 'gemini answered 400.' });
    expect(error.detail).toContain('Request contains an invalid argument.');
  });

  it.each([
    { status: 429, statusText: 'RESOURCE_EXHAUSTED', retryAfter: '7', waitMs: 7_000 },
    { status: 429, statusText: 'RESOURCE_EXHAUSTED', retryAfter: new Date(T0 + 30_000).toUTCString(), waitMs: 30_000 },
    { status: 500, statusText: 'INTERNAL', retryAfter: undefined, waitMs: undefined },
    { status: 503, statusText: 'UNAVAILABLE', retryAfter: '2', waitMs: 2_000 },
  ])('makes a $status (Retry-After $retryAfter) a retryable error, tried once', async ({ status, statusText, retryAfter, waitMs }) => {
    fake.fail('submit', { kind: 'status', status, statusText, message: 'The service is currently unavailable.', ...(retryAfter ? { retryAfter } : {}) });

    const error = await providerError(provider().start(job(), T0));

    expect(error).toMatchObject({ kind: 'retryable', status, retryAfterMs: waitMs });
    expect(error.message).not.toContain('unavailable');
    expect(fake.requests).toHaveLength(1);
  });

  it('takes the wait from Google’s RetryInfo when a 429 has no Retry-After header', async () => {
    const started = await startWith({ kind: 'never' });
    fake.fail('poll', { kind: 'status', status: 429, statusText: 'RESOURCE_EXHAUSTED', message: 'Quota exceeded.', retryDelay: '17s' });

    const error = await providerError(provider().poll(job(), started, T0 + 10_000));

    expect(error).toMatchObject({ kind: 'retryable', status: 429, retryAfterMs: 17_000 });
  });

  it.each([
    { status: 401, statusText: 'UNAUTHENTICATED' },
    { status: 403, statusText: 'PERMISSION_DENIED' },
    { status: 404, statusText: 'NOT_FOUND' },
  ])('makes a $status a deployment error', async ({ status, statusText }) => {
    fake.fail('submit', { kind: 'status', status, statusText, message: 'models/veo is not found for API version v1beta.' });

    expect(await providerError(provider().start(job(), T0))).toMatchObject({ kind: 'deployment', status });
  });

  it('makes a wrong key (Google’s 400 API_KEY_INVALID) a deployment error that never repeats the key', async () => {
    const wrongKey = 'AIzaSy-wrong-key-9876543210';

    const error = await providerError(provider({ apiKey: wrongKey }).start(job(), T0), wrongKey);

    expect(error).toMatchObject({ kind: 'deployment', status: 400 });
    expect(error.detail).toContain('API key not valid');
  });

  it.each([
    { what: 'not JSON', fault: { kind: 'malformed' } },
    { what: 'JSON without an operation name', fault: { kind: 'json', body: { done: false } } },
  ] as const)('makes a submission answer that is $what a retryable error', async ({ fault }) => {
    fake.fail('submit', fault);

    expect(await providerError(provider().start(job(), T0))).toMatchObject({ kind: 'retryable', message: 'gemini sent an unreadable answer.' });
  });

  it.each([
    { what: 'not JSON', fault: { kind: 'malformed' } },
    { what: 'JSON but no operation', fault: { kind: 'json', body: [] } },
  ] as const)('makes an operation answer that is $what a retryable error', async ({ fault }) => {
    const started = await startWith({ kind: 'never' });
    fake.fail('poll', fault);

    expect(await providerError(provider().poll(job(), started, T0 + 10_000))).toMatchObject({ kind: 'retryable', message: 'gemini sent an unreadable answer.' });
  });

  it('keeps an operation that never finishes in progress, below 100', async () => {
    const p = provider();
    const started = await startWith({ kind: 'never' });

    const afterAnHour = await p.poll(job(), started, T0 + 3_600_000);
    const afterADay = await p.poll(job(), started, T0 + 86_400_000);

    expect(afterAnHour).toMatchObject({ status: 'in_progress' });
    expect(afterADay).toMatchObject({ status: 'in_progress' });
    expect(afterADay.status === 'in_progress' && afterADay.progress).toBeLessThan(100);
  });

  it('turns a provider that never answers a submission into a retryable error within about requestTimeoutMs', async () => {
    fake.fail('submit', { kind: 'hang' });
    const began = performance.now();

    const error = await providerError(provider({ requestTimeoutMs: 300 }).start(job(), T0));

    expect(error).toMatchObject({ kind: 'retryable', message: 'gemini did not answer in time.' });
    expect(performance.now() - began).toBeLessThan(2_000);
  });

  it('turns a download that never answers into a retryable error within about requestTimeoutMs', async () => {
    const started = await startWith({ kind: 'video', polls: 0 });
    fake.fail('download', { kind: 'hang' });
    const began = performance.now();

    const error = await providerError(provider({ requestTimeoutMs: 300 }).download(job(), started));

    expect(error).toMatchObject({ kind: 'retryable', message: 'gemini did not answer in time.' });
    expect(performance.now() - began).toBeLessThan(2_000);
  });

  it('makes a failed download a retryable error', async () => {
    const started = await startWith({ kind: 'video', polls: 0 });
    fake.fail('download', { kind: 'status', status: 503, statusText: 'UNAVAILABLE', message: 'The service is currently unavailable.' });

    expect(await providerError(provider().download(job(), started))).toMatchObject({ kind: 'retryable', status: 503 });
  });

  it('makes a provider that cannot be reached a retryable error', async () => {
    const gone = await startFakeGeminiVeo(API_KEY, MP4);
    await gone.close();

    const error = await providerError(provider({ baseUrl: gone.baseUrl }).start(job(), T0));

    expect(error).toMatchObject({ kind: 'retryable', message: 'gemini could not be reached.' });
  });

  it.each([
    { seconds: '12', size: '1280x720', named: "seconds '12'" },
    { seconds: '4', size: '1792x1024', named: "seconds '4' at size '1792x1024'" },
    { seconds: '4', size: '1024x1792', named: "seconds '4' at size '1024x1792'" },
  ] as const)('refuses $seconds s at $size as a request error naming it, sending nothing', async ({ seconds, size, named }) => {
    const error = await providerError(provider().start(job({ seconds, size }), T0));

    expect(error.kind).toBe('request');
    expect(error.message).toContain(named);
    expect(fake.requests).toHaveLength(0);
  });

  it('describes the default models by what they can make, and knows no others', () => {
    for (const defaults of Object.values(GEMINI_VEO_VIDEO_DEFAULTS)) {
      expect(geminiVeoVideoCapabilities(defaults.model)).toEqual({ seconds: [...defaults.seconds], sizes: [...defaults.sizes] });
    }
    expect(geminiVeoVideoCapabilities(MODEL)?.seconds).toEqual(['4', '8']);
    expect(geminiVeoVideoCapabilities('veo-9-unknown')).toBeUndefined();
  });

  it('leaves a model it does not know to the catalog and to Google: the job is sent as asked', async () => {
    await provider({ model: 'veo-9-unknown' }).start(job({ seconds: '12', size: '1792x1024' }), T0);

    expect(fake.requests[0]).toMatchObject({
      path: '/v1beta/models/veo-9-unknown:predictLongRunning',
      body: { parameters: { durationSeconds: 12, aspectRatio: '16:9', resolution: '1080p' } },
    });
  });
});
