import type { VideoSeconds, VideoSize } from '@oc/contracts';
import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ReplicateVideoProvider, type ReplicateVideoOptions } from '../src/adapters/replicate';
import { REPLICATE_VIDEO_DEFAULTS, replicateVideoCapabilities } from '../src/adapters/replicate-models';
import type { GenerationJob, StartedGeneration } from '../src/application/ports';
import { type FakeReplicate, problem, startFakeReplicate } from './fakes/replicate';

const API_KEY = 'r8_fake_key_that_must_never_leak';
const T0 = 1_767_225_600_000;
const FAST = REPLICATE_VIDEO_DEFAULTS['video-2'].model;
const PRO = REPLICATE_VIDEO_DEFAULTS['video-2-pro'].model;

let fake: FakeReplicate;

beforeAll(async () => {
  fake = await startFakeReplicate(API_KEY, Buffer.from('fake-mp4'));
});
afterAll(() => fake.close());
beforeEach(() => fake.reset());

function provider(options: Partial<ReplicateVideoOptions> = {}) {
  return new ReplicateVideoProvider({ apiKey: API_KEY, baseUrl: fake.url, model: FAST, pollIntervalMs: 5_000, requestTimeoutMs: 2_000, ...options });
}

function job(overrides: Partial<GenerationJob> = {}): GenerationJob {
  return { videoId: 'video_1', model: 'video-2', prompt: 'A calm lake at dawn, mist rising', seconds: '4', size: '1280x720', ...overrides };
}

async function started(adapter = provider(), j = job()): Promise<StartedGeneration> {
  const result = await adapter.start(j, T0);
  if ('status' in result) throw new Error(`start failed: ${result.code}`);
  return result;
}

async function providerError(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  const providerErr = error as ProviderError;
  expect(`${providerErr.message} ${providerErr.detail}`).not.toContain(API_KEY);
  return providerErr;
}

const apiRequests = () => fake.requests.filter((r) => r.path.startsWith('/v1/'));

/** Our sizes in the models' terms, written out rather than taken from the adapter. */
const SHAPE: Record<VideoSize, { aspect_ratio: string; tier: '720p' | '1080p' }> = {
  '1280x720': { aspect_ratio: '16:9', tier: '720p' },
  '720x1280': { aspect_ratio: '9:16', tier: '720p' },
  '1792x1024': { aspect_ratio: '16:9', tier: '1080p' },
  '1024x1792': { aspect_ratio: '9:16', tier: '1080p' },
};

const EXPECTED_INPUT: Record<string, (prompt: string, seconds: VideoSeconds, size: VideoSize) => Record<string, unknown>> = {
  'bytedance/seedance-2.0-fast': (prompt, seconds, size) => ({ prompt, duration: Number(seconds), resolution: SHAPE[size].tier, aspect_ratio: SHAPE[size].aspect_ratio }),
  'bytedance/seedance-2.0': (prompt, seconds, size) => ({ prompt, duration: Number(seconds), resolution: SHAPE[size].tier, aspect_ratio: SHAPE[size].aspect_ratio }),
  'kwaivgi/kling-v3-video': (prompt, seconds, size) => ({
    prompt,
    duration: Number(seconds),
    mode: SHAPE[size].tier === '1080p' ? 'pro' : 'standard',
    aspect_ratio: SHAPE[size].aspect_ratio,
  }),
};

const TRANSLATIONS = Object.keys(EXPECTED_INPUT).flatMap((model) => {
  const caps = replicateVideoCapabilities(model)!;
  return caps.seconds.flatMap((seconds) => caps.sizes.map((size) => ({ model, seconds: seconds as VideoSeconds, size: size as VideoSize })));
});

describe('Replicate capabilities', () => {
  it('offers the defaults exactly what their models can make, and nothing for an unknown model', () => {
    expect(replicateVideoCapabilities(FAST)).toEqual({ seconds: ['4', '8', '12'], sizes: ['1280x720', '720x1280'] });
    expect(replicateVideoCapabilities(PRO)).toEqual({ seconds: ['4', '8', '12'], sizes: ['1280x720', '720x1280', '1792x1024', '1024x1792'] });
    expect(replicateVideoCapabilities('someone/some-model')).toBeUndefined();
  });
});

describe('ReplicateVideoProvider through the replicate SDK against a local Replicate API', () => {
  it.each(TRANSLATIONS)('asks $model for $seconds s at $size in its own input terms', async ({ model, seconds, size }) => {
    const result = await provider({ model }).start(job({ seconds, size }), T0);

    expect(result).toEqual({ upstreamId: expect.any(String), startedAt: T0 });
    const [request] = apiRequests();
    expect(apiRequests()).toHaveLength(1);
    expect(request).toMatchObject({ method: 'POST', path: `/v1/models/${model}/predictions` });
    expect(request!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.body).toEqual({ input: EXPECTED_INPUT[model]!(job().prompt, seconds, size) });
  });

  it.each([
    [FAST, 'image'],
    [PRO, 'start_image'],
  ])('starts %s from an input_reference image, sent as a data URL in %s', async (model, field) => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const result = await provider({ model }).start(job({ image: { data: png, contentType: 'image/png' } }), T0);
    expect(result).toEqual({ upstreamId: expect.any(String), startedAt: T0 });
    expect(apiRequests()[0]!.body).toEqual({
      input: { ...EXPECTED_INPUT[model]!(job().prompt, job().seconds, job().size), [field]: `data:image/png;base64,${png.toString('base64')}` },
    });
  });

  it('refuses an image type the model does not take, before sending anything', async () => {
    const webp = Buffer.from('524946460000000057454250', 'hex');
    const refused = await providerError(provider({ model: PRO }).start(job({ image: { data: webp, contentType: 'image/webp' } }), T0));
    expect(refused.kind).toBe('request');
    expect(apiRequests()).toEqual([]);
  });

  it('runs a prediction to completion: rising progress, then the MP4 bytes the provider served', async () => {
    const adapter = provider();
    fake.plan({ outcome: 'succeed', afterPolls: 3 });
    const run = await started(adapter);

    const early = await adapter.poll(job(), run, T0 + 10_000);
    const later = await adapter.poll(job(), run, T0 + 120_000);
    expect(early).toEqual({ status: 'in_progress', progress: expect.any(Number) });
    expect(later).toEqual({ status: 'in_progress', progress: expect.any(Number) });
    const [p1, p2] = [(early as { progress: number }).progress, (later as { progress: number }).progress];
    expect(p1).toBeGreaterThanOrEqual(1);
    expect(p2).toBeGreaterThan(p1);
    expect(p2).toBeLessThan(100);

    expect(await adapter.poll(job(), run, T0 + 180_000)).toEqual({ status: 'completed' });
    expect(await adapter.download(job(), run)).toEqual({ kind: 'bytes', video: fake.video });
    expect(apiRequests().filter((r) => r.method === 'GET').map((r) => r.path)).toContain(`/v1/predictions/${run.upstreamId}`);
    expect(adapter.nextPollAt(job(), run, T0 + 180_000)).toBe(T0 + 185_000);
  });

  it('polls and downloads from the upstream id alone in a new adapter instance', async () => {
    const { upstreamId } = await started();

    const restarted = provider();
    const run = { upstreamId, startedAt: T0 };
    expect(await restarted.poll(job(), run, T0 + 60_000)).toEqual({ status: 'completed' });
    expect((await restarted.download(job(), run)).video).toEqual(fake.video);
  });

  it('downloads a list output from its first URL and never sends the API key to the file host', async () => {
    fake.plan({ outcome: 'succeed', afterPolls: 1, output: 'list' });
    const run = await started();

    expect(await provider().download(job(), run)).toEqual({ kind: 'bytes', video: fake.video });
    const fileRequest = fake.requests.find((r) => r.path.endsWith('/output.mp4'));
    expect(fileRequest).toBeDefined();
    expect(fileRequest!.headers.authorization).toBeUndefined();
  });

  it.each([
    { name: 'failed with a model error', plan: { outcome: 'fail', afterPolls: 1, error: 'CUDA error: out of memory (E1001)' }, code: 'generation_failed' },
    {
      name: "failed on Seedance's content filter",
      plan: { outcome: 'fail', afterPolls: 1, error: 'The input or output was flagged as sensitive. Please try again with different inputs. (E005)' },
      code: 'content_policy_violation',
    },
    { name: 'failed as NSFW', plan: { outcome: 'fail', afterPolls: 1, error: 'NSFW content detected in the output' }, code: 'content_policy_violation' },
    { name: 'failed to start in time', plan: { outcome: 'fail', afterPolls: 1, error: 'Prediction failed to start in time (E6716)' }, code: 'timeout' },
    { name: 'aborted before starting', plan: { outcome: 'aborted', afterPolls: 1 }, code: 'timeout' },
    { name: 'canceled', plan: { outcome: 'canceled', afterPolls: 1 }, code: 'generation_failed' },
    { name: 'succeeded without a video', plan: { outcome: 'succeed', afterPolls: 1, output: 'none' }, code: 'generation_failed' },
  ] as const)('ends a prediction that $name with $code, returned rather than thrown', async ({ plan, code }) => {
    fake.plan(plan);
    const run = await started();

    const result = await provider().poll(job(), run, T0 + 60_000);

    expect(result).toEqual({ status: 'failed', code, message: expect.any(String) });
    const { message } = result as { message: string };
    expect(message).not.toMatch(/E005|E1001|E6716|CUDA|NSFW|flagged/);
  });

  it('fails the job when the provider refuses the prompt at submission on policy grounds', async () => {
    fake.answerNext({ status: 422, body: problem(422, 'Input validation failed', 'The prompt was flagged by the safety system (E005)') });

    const result = await provider().start(job(), T0);

    expect(result).toEqual({ status: 'failed', code: 'content_policy_violation', message: expect.any(String) });
  });

  it('throws a request error, the provider text kept to the detail, for other invalid input at submission', async () => {
    const detail = '- input.duration: Input should be less than or equal to 15';
    fake.answerNext({ status: 422, body: problem(422, 'Input validation failed', detail) });

    const error = await providerError(provider().start(job(), T0));

    expect(error).toMatchObject({ kind: 'request', status: 422 });
    expect(error.message).not.toContain('input.duration');
    expect(error.detail).toContain(detail);
  });

  it('treats 402 (our own Replicate credit) as this deployment being unusable, not a customer failure', async () => {
    fake.answerNext({ status: 402, body: problem(402, 'Billing required', 'You need to set up billing to run this model.') });

    const error = await providerError(provider().start(job(), T0));

    expect(error).toMatchObject({ kind: 'deployment', status: 402 });
  });

  it.each<{ call: 'start' | 'poll'; status: number; headers: Record<string, string>; retryAfterMs: number | undefined }>([
    { call: 'start', status: 429, headers: { 'retry-after': '7' }, retryAfterMs: 7_000 },
    { call: 'poll', status: 429, headers: { 'retry-after': '3' }, retryAfterMs: 3_000 },
    { call: 'poll', status: 500, headers: {}, retryAfterMs: undefined },
    { call: 'poll', status: 503, headers: { 'retry-after': '2' }, retryAfterMs: 2_000 },
    { call: 'start', status: 503, headers: {}, retryAfterMs: undefined },
  ])('makes $status on $call a retryable error after one request, with its Retry-After', async ({ call, status, headers, retryAfterMs }) => {
    const run = call === 'poll' ? await started() : undefined;
    fake.reset();
    fake.answerNext({ status, headers, body: problem(status, 'Request was throttled', 'Request was throttled. Expected available in 7 seconds.') });

    const attempt = run ? provider().poll(job(), run, T0 + 1_000) : provider().start(job(), T0);
    const error = await providerError(attempt);

    expect(error).toMatchObject({ kind: 'retryable', status, retryAfterMs });
    expect(apiRequests()).toHaveLength(1);
  });

  it('makes a wrong key (401) a deployment error without echoing the key', async () => {
    const error = await providerError(provider({ apiKey: 'r8_wrong_key' }).start(job(), T0));

    expect(error).toMatchObject({ kind: 'deployment', status: 401 });
    expect(`${error.message} ${error.detail}`).not.toContain('r8_wrong_key');
  });

  it('makes an unknown prediction (404) a deployment error', async () => {
    const error = await providerError(provider().poll(job(), { upstreamId: 'no-such-prediction', startedAt: T0 }, T0));

    expect(error).toMatchObject({ kind: 'deployment', status: 404 });
  });

  it.each([
    { name: 'a body that is not JSON', answer: { status: 200, raw: '<html>gateway hiccup</html>' } },
    { name: 'a prediction without an id', answer: { status: 201, body: { status: 'starting' } } },
    { name: 'a status Replicate does not document', answer: { status: 201, body: { id: 'x1', status: 'queued' } } },
  ])('makes $name a retryable error', async ({ answer }) => {
    fake.answerNext(answer);

    const error = await providerError(provider().start(job(), T0));

    expect(error.kind).toBe('retryable');
  });

  it('keeps a prediction that never finishes in progress, below 100, however long it runs', async () => {
    fake.plan({ outcome: 'never' });
    const adapter = provider();
    const run = await started(adapter);

    for (const elapsed of [1_000, 600_000, 24 * 3_600_000]) {
      const status = await adapter.poll(job(), run, T0 + elapsed);
      expect(status).toEqual({ status: 'in_progress', progress: expect.any(Number) });
      expect((status as { progress: number }).progress).toBeGreaterThanOrEqual(1);
      expect((status as { progress: number }).progress).toBeLessThan(100);
    }
  });

  it('reports the percentage a model logs rather than the time estimate', async () => {
    fake.plan({ outcome: 'never', logs: 'loading\n 42%|████▏     | 21/50 [00:10<00:14,  2.01it/s]' });
    const adapter = provider();
    const run = await started(adapter);

    expect(await adapter.poll(job(), run, T0 + 1_000)).toEqual({ status: 'in_progress', progress: 41 });
  });

  it('gives up on a hung provider within about requestTimeoutMs, retryable, after one request', async () => {
    fake.hangNext();
    const begun = Date.now();

    const error = await providerError(provider({ requestTimeoutMs: 300 }).start(job(), T0));

    expect(error.kind).toBe('retryable');
    expect(Date.now() - begun).toBeLessThan(2_000);
    expect(apiRequests()).toHaveLength(1);
  });

  it('gives up on a stalled video download within about requestTimeoutMs', async () => {
    const run = await started();
    fake.hangNext('file');
    const begun = Date.now();

    const error = await providerError(provider({ requestTimeoutMs: 300 }).download(job(), run));

    expect(error.kind).toBe('retryable');
    expect(Date.now() - begun).toBeLessThan(2_000);
  });

  it.each([
    { name: 'a size the model cannot make', overrides: { size: '1792x1024' as const }, parameter: 'size' },
    // A length outside the contract stands for a future one the model lacks.
    { name: 'a length the model cannot make', overrides: { seconds: '6' as VideoSeconds }, parameter: 'seconds' },
  ])('refuses $name as a request error naming the parameter, sending nothing', async ({ overrides, parameter }) => {
    const error = await providerError(provider().start(job(overrides), T0));

    expect(error.kind).toBe('request');
    expect(error.message).toContain(parameter);
    expect(fake.requests).toHaveLength(0);
  });

  it('refuses a model it does not know how to ask, sending nothing', async () => {
    const error = await providerError(provider({ model: 'someone/some-video-model' }).start(job(), T0));

    expect(error.kind).toBe('request');
    expect(fake.requests).toHaveLength(0);
  });
});
