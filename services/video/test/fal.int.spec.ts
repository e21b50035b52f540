import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FalVideoProvider, type FalVideoOptions } from '../src/adapters/fal';
import { FAL_VIDEO_DEFAULTS, falVideoCapabilities } from '../src/adapters/fal-models';
import type { GenerationJob, StartedGeneration } from '../src/application/ports';
import { startFakeFal, type FakeFal, type FalAnswer, type FalOutcome } from './fakes/fal';

const KEY = 'key-id-0f3c:secret-9a1b7e';
const PROMPT = 'A red fox crossing a snowy field at dawn';
const MP4 = Buffer.from('fake-mp4');
const T0 = 1_767_225_600_000;
const FAST = FAL_VIDEO_DEFAULTS['video-2'].model;
const PRO = FAL_VIDEO_DEFAULTS['video-2-pro'].model;
const FRAMES = {
  '1280x720': { aspect_ratio: '16:9', resolution: '720p' },
  '720x1280': { aspect_ratio: '9:16', resolution: '720p' },
  '1792x1024': { aspect_ratio: '16:9', resolution: '1080p' },
  '1024x1792': { aspect_ratio: '9:16', resolution: '1080p' },
} as const;
const POLICY_REFUSAL = {
  loc: ['body', 'prompt'],
  msg: 'The content could not be processed because it contained material flagged by a content checker.',
  type: 'content_policy_violation',
};
const NOT_ONE_OF = { loc: ['body', 'duration'], msg: "Input should be '4' or '8'", type: 'one_of' };

let fal: FakeFal;

beforeAll(async () => {
  fal = await startFakeFal(KEY, MP4);
});
afterAll(() => fal.close());
beforeEach(() => {
  fal.requests.length = 0;
});

function provider(options: Partial<FalVideoOptions> = {}): FalVideoProvider {
  return new FalVideoProvider({ apiKey: KEY, baseUrl: fal.url, model: FAST, pollIntervalMs: 5_000, requestTimeoutMs: 2_000, ...options });
}

function job(overrides: Partial<GenerationJob> = {}): GenerationJob {
  return { videoId: 'video_1', model: 'video-2', prompt: PROMPT, seconds: '8', size: '1280x720', ...overrides };
}

async function started(adapter: FalVideoProvider, outcome: FalOutcome = { completeAfterPolls: 2 }): Promise<StartedGeneration> {
  fal.plan(outcome);
  const start = await adapter.start(job(), T0);
  if ('status' in start) throw new Error(`fal refused the job: ${start.message}`);
  return start;
}

async function providerError(call: Promise<unknown>): Promise<ProviderError> {
  const error = await call.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const submits = () => fal.requests.filter((request) => request.method === 'POST');

describe('FalVideoProvider against a local fake of fal’s queue API', () => {
  it('sends every length and size of both defaults as Seedance input: a bare number, an aspect ratio and a resolution', async () => {
    for (const model of [FAST, PRO]) {
      for (const seconds of ['4', '8', '12'] as const) {
        for (const size of Object.keys(FRAMES) as (keyof typeof FRAMES)[]) {
          fal.requests.length = 0;
          await provider({ model }).start(job({ seconds, size }), T0);
          expect(submits().map(({ path, body }) => ({ path, body }))).toEqual([
            { path: `/${model}`, body: { prompt: PROMPT, duration: seconds, ...FRAMES[size] } },
          ]);
        }
      }
    }
  });

  it("submits a job with an input_reference to the endpoint's image-to-video sibling, the image as a data URI, and polls it on the same app", async () => {
    const jpeg = Buffer.from('ffd8ffe000104a464946', 'hex');
    fal.plan({ completeAfterPolls: 1 });
    const adapter = provider({ model: FAST });
    const start = await adapter.start(job({ image: { data: jpeg, contentType: 'image/jpeg' } }), T0);
    if ('status' in start) throw new Error('refused');
    expect(submits().map(({ path, body }) => ({ path, body }))).toEqual([
      {
        path: '/fal-ai/bytedance/seedance/v1/pro/fast/image-to-video',
        body: { prompt: PROMPT, duration: '8', ...FRAMES['1280x720'], image_url: `data:image/jpeg;base64,${jpeg.toString('base64')}` },
      },
    ]);
    expect(await adapter.poll(job(), start, T0 + 5_000)).toMatchObject({ status: 'in_progress' });
    expect(await adapter.poll(job(), start, T0 + 10_000)).toEqual({ status: 'completed' });
    // Veo on fal too, with its own sibling.
    await provider({ model: 'fal-ai/veo3.1/fast' }).start(job({ seconds: '4', image: { data: jpeg, contentType: 'image/jpeg' } }), T0);
    expect(submits().at(-1)!.path).toBe('/fal-ai/veo3.1/fast/image-to-video');
  });

  it('refuses an input_reference for an endpoint without an image-to-video sibling, before sending anything', async () => {
    const png = Buffer.from('89504e470d0a1a0a', 'hex');
    const refused = await providerError(provider({ model: 'bytedance/seedance-2.0/fast/text-to-video' }).start(job({ size: '720x1280', image: { data: png, contentType: 'image/png' } }), T0));
    expect(refused.kind).toBe('request');
    expect(submits()).toEqual([]);
  });

  it('writes a Veo length with its unit', async () => {
    const veo = provider({ model: 'fal-ai/veo3.1/fast' });
    await veo.start(job({ seconds: '4', size: '720x1280' }), T0);
    await veo.start(job({ seconds: '8', size: '1792x1024' }), T0);
    expect(submits().map(({ path, body }) => ({ path, body }))).toEqual([
      { path: '/fal-ai/veo3.1/fast', body: { prompt: PROMPT, duration: '4s', aspect_ratio: '9:16', resolution: '720p' } },
      { path: '/fal-ai/veo3.1/fast', body: { prompt: PROMPT, duration: '8s', aspect_ratio: '16:9', resolution: '1080p' } },
    ]);
  });

  it('refuses a length, a size or an endpoint it cannot map, naming what, before sending anything', async () => {
    const length = await providerError(provider({ model: 'fal-ai/veo3.1' }).start(job({ seconds: '12' }), T0));
    const size = await providerError(provider({ model: 'bytedance/seedance-2.0/fast/text-to-video' }).start(job({ size: '1024x1792' }), T0));
    const endpoint = await providerError(provider({ model: 'fal-ai/kling-video/v2.1/master/text-to-video' }).start(job(), T0));
    expect([length.kind, size.kind, endpoint.kind]).toEqual(['request', 'request', 'request']);
    expect(length.message).toMatch(/seconds 12/);
    expect(size.message).toMatch(/size 1024x1792/);
    expect(endpoint.message).toMatch(/fal-ai\/kling-video\/v2\.1\/master\/text-to-video/);
    expect(fal.requests).toEqual([]);
  });

  it('states the lengths and sizes of the endpoints it can map, and none for others', () => {
    for (const { model, seconds, sizes } of Object.values(FAL_VIDEO_DEFAULTS)) {
      expect(falVideoCapabilities(model)).toEqual({ seconds: [...seconds], sizes: [...sizes] });
    }
    expect(falVideoCapabilities('fal-ai/veo3.1')?.seconds).toEqual(['4', '8']);
    expect(falVideoCapabilities('fal-ai/kling-video/v2.1/master/text-to-video')).toBeUndefined();
  });

  it('starts, reports growing progress below 100 while fal runs the job, completes, and downloads the bytes fal served', async () => {
    const adapter = provider();
    const start = await started(adapter, { completeAfterPolls: 2 });
    expect(start.startedAt).toBe(T0);
    expect(adapter.nextPollAt(job(), start, T0)).toBe(T0 + 5_000);

    const queued = await adapter.poll(job(), start, T0 + 20_000);
    const running = await adapter.poll(job(), start, T0 + 60_000);
    expect(queued).toEqual({ status: 'in_progress', progress: expect.any(Number) });
    expect(running).toEqual({ status: 'in_progress', progress: expect.any(Number) });
    const [early, later] = [queued, running].map((status) => (status.status === 'in_progress' ? status.progress : NaN));
    expect(early).toBeGreaterThanOrEqual(1);
    expect(later).toBeGreaterThan(early!);
    expect(later).toBeLessThan(100);

    expect(await adapter.poll(job(), start, T0 + 90_000)).toEqual({ status: 'completed' });
    expect(await adapter.download(job(), start)).toEqual({ kind: 'bytes', video: MP4 });
    // Status and result live on the endpoint's owner and app, without its path.
    expect(fal.requests.filter((request) => request.method === 'GET').map((request) => request.path)).toContain(
      `/fal-ai/bytedance/requests/${start.upstreamId}/status`,
    );
  });

  it('lets a new instance poll and download a job from its upstream id alone', async () => {
    const start = await started(provider(), { completeAfterPolls: 0 });
    const afterRestart = provider();
    const stored = { upstreamId: start.upstreamId, startedAt: start.startedAt };
    expect(await afterRestart.poll(job(), stored, T0 + 60_000)).toEqual({ status: 'completed' });
    expect(await afterRestart.download(job(), stored)).toEqual({ kind: 'bytes', video: MP4 });
  });

  it.each<[string, FalAnswer, string]>([
    [
      'a runner error fal gave up on',
      {
        status: 500,
        body: { detail: 'Runner crashed', error_type: 'runner_server_error' },
        headers: { 'x-fal-error-type': 'runner_server_error' },
      },
      'generation_failed',
    ],
    ['a refusal of the input by the model', { status: 422, body: { detail: [NOT_ONE_OF] } }, 'generation_failed'],
    ['a content policy refusal', { status: 422, body: { detail: [POLICY_REFUSAL] } }, 'content_policy_violation'],
    [
      'a generation that ran out of time',
      { status: 504, body: { detail: [{ loc: ['body'], msg: 'Generation timeout', type: 'generation_timeout' }] } },
      'timeout',
    ],
  ])('fails the job when its result is %s, in our own words', async (_case, failWith, code) => {
    const adapter = provider();
    const status = await adapter.poll(job(), await started(adapter, { failWith }), T0 + 30_000);
    expect(status).toEqual({ status: 'failed', code, message: expect.any(String) });
    expect(JSON.stringify(status)).not.toMatch(/Runner|Input should|content checker|Generation timeout/);
  });

  it('fails the job at once when fal refuses the prompt at submission', async () => {
    fal.interrupt('submit', { status: 422, body: { detail: [POLICY_REFUSAL] } });
    const start = await provider().start(job(), T0);
    expect(start).toEqual({ status: 'failed', code: 'content_policy_violation', message: expect.any(String) });
    expect(JSON.stringify(start)).not.toMatch(/content checker/);
  });

  it('throws a request-kind error for another refusal at submission, fal’s words in the detail only', async () => {
    fal.interrupt('submit', { status: 422, body: { detail: [NOT_ONE_OF] } });
    const error = await providerError(provider().start(job(), T0));
    expect(error).toMatchObject({ kind: 'request', status: 422 });
    expect(error.message).not.toMatch(/Input should/);
    expect(error.detail).toMatch(/Input should/);
  });

  it.each<[number, Record<string, string>, number | undefined]>([
    [429, { 'retry-after': '7' }, 7_000],
    [500, {}, undefined],
    [503, { 'retry-after': '2' }, 2_000],
  ])('makes a %i at submission a retryable error with fal’s Retry-After, after one attempt', async (status, headers, wait) => {
    fal.interrupt('submit', { status, body: { detail: 'Service is busy', error_type: 'runner_scheduling_failure' }, headers });
    const error = await providerError(provider().start(job(), T0));
    expect(error).toMatchObject({ kind: 'retryable', status, retryAfterMs: wait });
    expect(submits()).toHaveLength(1);
  });

  it('makes a 500 while polling, an untyped 503 for the result and a 503 for the file retryable, after one attempt each', async () => {
    const adapter = provider();
    const start = await started(adapter, { completeAfterPolls: 0 });
    fal.interrupt('status', { status: 500, body: { detail: 'Internal Server Error' } });
    expect(await providerError(adapter.poll(job(), start, T0 + 1_000))).toMatchObject({ kind: 'retryable', status: 500 });
    fal.interrupt('result', { status: 503, body: 'Service Unavailable', headers: { 'content-type': 'text/plain' } });
    expect(await providerError(adapter.poll(job(), start, T0 + 2_000))).toMatchObject({ kind: 'retryable', status: 503 });
    fal.interrupt('file', { status: 503, body: 'Service Unavailable', headers: { 'content-type': 'text/plain' } });
    expect(await providerError(adapter.download(job(), start))).toMatchObject({ kind: 'retryable', status: 503 });
    expect(fal.requests.map(({ method, path }) => `${method} ${path.split('/').slice(-2).join('/')}`)).toEqual([
      `POST fast/text-to-video`,
      `GET ${start.upstreamId}/status`,
      `GET ${start.upstreamId}/status`,
      `GET requests/${start.upstreamId}`,
      `GET requests/${start.upstreamId}`,
      `GET files/${start.upstreamId}.mp4`,
    ]);
  });

  it('makes a wrong key, an account out of credit and an unknown request deployment-kind errors', async () => {
    const wrongKey = await providerError(provider({ apiKey: 'someone-elses-key' }).start(job(), T0));
    fal.interrupt('submit', { status: 403, body: { detail: 'User is locked. Reason: Exhausted balance.' } });
    const forbidden = await providerError(provider().start(job(), T0));
    const unknown = await providerError(provider().poll(job(), { upstreamId: 'req-never-submitted', startedAt: T0 }, T0));
    expect([wrongKey, forbidden, unknown].map(({ kind, status }) => ({ kind, status }))).toEqual([
      { kind: 'deployment', status: 401 },
      { kind: 'deployment', status: 403 },
      { kind: 'deployment', status: 404 },
    ]);
  });

  it('sends the key as `Authorization: Key <key>` to the queue only, and never repeats it in an error', async () => {
    const adapter = provider();
    const start = await started(adapter, { completeAfterPolls: 0 });
    await adapter.poll(job(), start, T0);
    await adapter.download(job(), start);
    const queueCalls = fal.requests.filter((request) => !request.path.startsWith('/files/'));
    expect(queueCalls.map((request) => request.headers.authorization)).toEqual([`Key ${KEY}`, `Key ${KEY}`, `Key ${KEY}`, `Key ${KEY}`]);
    expect(fal.requests.find((request) => request.path.startsWith('/files/'))?.headers.authorization).toBeUndefined();

    fal.interrupt('submit', { status: 500, body: { detail: `Upstream rejected credentials ${KEY}` } });
    const error = await providerError(adapter.start(job(), T0));
    expect(`${error.message} ${error.detail}`).not.toContain(KEY);
    expect(error.detail).toContain('Upstream rejected credentials');
  });

  it.each<[string, 'submit' | 'status' | 'result', FalAnswer]>([
    ['a submission without a request id', 'submit', { status: 200, body: { queue_position: 0 } }],
    ['a submission that is not JSON', 'submit', 'unparsable'],
    ['a status fal does not have', 'status', { status: 200, body: { status: 'DONE' } }],
    ['a result without a video', 'result', { status: 200, body: { seed: 1 } }],
  ])('makes %s a retryable error', async (_case, route, answer) => {
    const adapter = provider();
    const start = route === 'submit' ? undefined : await started(adapter, { completeAfterPolls: 0 });
    fal.interrupt(route, answer);
    const error = await providerError(start ? adapter.poll(job(), start, T0) : adapter.start(job(), T0));
    expect(error.kind).toBe('retryable');
  });

  it('keeps a job fal never finishes in progress, below 100', async () => {
    const adapter = provider();
    const start = await started(adapter, 'never');
    for (const later of [10_000, 3_600_000, 86_400_000]) {
      const status = await adapter.poll(job(), start, T0 + later);
      expect(status).toEqual({ status: 'in_progress', progress: expect.any(Number) });
      expect(status.status === 'in_progress' && status.progress).toBeLessThan(100);
    }
  });

  it('gives up on a call fal never answers after about the request timeout, as retryable', async () => {
    const adapter = provider({ requestTimeoutMs: 300 });
    fal.interrupt('submit', 'hang');
    const before = Date.now();
    const error = await providerError(adapter.start(job(), T0));
    expect(Date.now() - before).toBeLessThan(1_500);
    expect(error).toMatchObject({ kind: 'retryable', message: 'fal did not answer in time.' });
    expect(submits()).toHaveLength(1);
  });

  it('makes a refused connection retryable at once, without the client’s own backoff', async () => {
    const before = Date.now();
    const error = await providerError(provider({ baseUrl: 'http://127.0.0.1:9' }).start(job(), T0));
    expect(error).toMatchObject({ kind: 'retryable', message: 'fal could not be reached.' });
    // The client's first retry alone would wait about a second.
    expect(Date.now() - before).toBeLessThan(700);
  });
});
