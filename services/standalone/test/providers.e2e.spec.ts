import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FakeAnthropic, startFakeAnthropic } from '../../chat/test/fakes/anthropic';
import { type FakeGemini, startFakeGemini } from '../../chat/test/fakes/gemini';
import { type FakeUpstream, startFakeUpstream } from '../../chat/test/fake-upstream';
import { FfmpegRenderer } from '../../video/src/adapters/ffmpeg-renderer';
import { type FakeFal, startFakeFal } from '../../video/test/fakes/fal';
import { type FakeGeminiVeo, startFakeGeminiVeo } from '../../video/test/fakes/gemini-veo';
import { type FakeReplicate, startFakeReplicate } from '../../video/test/fakes/replicate';
import { clientFor } from './client';
import { conformingFetch } from './conformance';
import { embedded, type RunningService } from './harness';
import { MICROS_PER_TOKEN, micros } from './money';
import { readSse } from './sse';

/**
 * The providers issue as a customer sees it: each public model served by the provider whose key is set, failing
 * over to the next one, against local fakes of each provider's documented API (no real provider host is named
 * here). Chat deployments look only at the OpenAI, Anthropic and Gemini variables and video deployments only at
 * the Gemini, fal and Replicate ones, so one start can hold a chat-only provider beside a video-only one and each
 * model is still served by that provider alone: four starts cover the seven cases.
 */

const OPENAI_KEY = 'sk-openai-fake-key';
const ANTHROPIC_KEY = 'sk-ant-fake-key';
const GEMINI_KEY = 'gemini-fake-key';
const FAL_KEY = 'fal-fake-key:secret';
const REPLICATE_TOKEN = 'r8_fake_token';

/** The providers' usual variables. */
const PROVIDER_VARIABLES = [
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_BASE_URL',
  'GEMINI_API_KEY',
  'GEMINI_BASE_URL',
  'FAL_KEY',
  'FAL_BASE_URL',
  'REPLICATE_API_TOKEN',
  'REPLICATE_BASE_URL',
];

const SCOPES = ['video:read', 'video:write', 'chat:read', 'chat:write'];
const PROMPT = 'A paper boat drifting down a rainy street';
/** video-2 at 1280x720 costs 0.1 USD a second (the README's price table). */
const VIDEO_2_MICROS_PER_SECOND = 100_000;
const hello = [{ role: 'user', content: 'How do community gardens change a neighbourhood?' }];

/** A real MP4 for the fakes to serve: the service makes a thumbnail of what it downloads, with ffmpeg. */
let mp4: Buffer;
/** The embedded service runs in this process, and deployments also read its environment: none leaks in. */
const saved = new Map<string, string | undefined>();

beforeAll(async () => {
  for (const name of PROVIDER_VARIABLES) {
    saved.set(name, process.env[name]);
    delete process.env[name];
  }
  const dir = await mkdtemp(join(tmpdir(), 'oc-providers-mp4-'));
  const renderer = new FfmpegRenderer({ cacheDir: dir });
  try {
    mp4 = await readFile((await renderer.clip('1280x720', '4')).video);
  } finally {
    await renderer.close();
    await rm(dir, { recursive: true, force: true });
  }
});
afterAll(() => {
  for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
});

/** What every start has besides the providers' variables: quick polls, no simulator clips rendered ahead. */
const start = (providers: Record<string, string>) =>
  embedded({ VIDEO_UPSTREAM_POLL_MS: '200', VIDEO_RETRY_MS: '200', SIM_VIDEO_PRERENDER: '0', ...providers });

/** What a customer does and reads, against one running service. */
function customerOf(get: () => RunningService) {
  const api = () => clientFor(get());
  const newCustomer = () => api().newCustomer({ credit: 10, tier: 'enterprise', scopes: SCOPES, key: { rate_limit_per_minute: 100_000 } });
  const balance = async (key: string) => {
    const res = await api().call('GET', '/v1/account/balance', { token: key });
    expect(res.status).toBe(200);
    return { available: micros(res.body.available), reserved: micros(res.body.reserved) };
  };
  const ledgerFor = async (orgId: string, reference: string) =>
    ((await api().admin('GET', `/organizations/${orgId}/ledger?limit=100`)).body.data as any[]).filter((e) => e.reference === reference);

  /**
   * Polls until `probe` passes. The embedded service schedules its provider polls on the test's clock: each try
   * moves it by one poll interval, so no real time has to pass.
   */
  const eventually = <T>(probe: () => Promise<T>) =>
    vi.waitFor(
      async () => {
        get().clock!.advance(200);
        return probe();
      },
      { timeout: 20_000, interval: 50 },
    );

  const createVideo = (key: string, body: Record<string, unknown>) =>
    api().call('POST', '/v1/videos', { token: key, body: { model: 'video-2', prompt: PROMPT, size: '1280x720', ...body } });

  /** Waits for the video to end (completed or failed) and answers it. */
  const finished = (key: string, id: string) =>
    eventually(async () => {
      const res = await api().call('GET', `/v1/videos/${id}`, { token: key });
      expect(res.status).toBe(200);
      expect(res.body.status).toMatch(/^(completed|failed)$/);
      return res.body;
    });

  /** A video-2 made through whatever serves it: completed, its MP4 the bytes the provider's fake served, charged its price once. */
  async function expectVideoCompletes(seconds: '4' | '8') {
    const { key, orgId } = await newCustomer();
    const price = Number(seconds) * VIDEO_2_MICROS_PER_SECOND;
    const created = await createVideo(key, { seconds });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ status: 'queued', model: 'video-2', seconds, size: '1280x720', 'x-cost': { amount: price / 1e6, currency: 'usd' } });
    expect(await balance(key)).toEqual({ available: 10_000_000 - price, reserved: price });

    const video = await finished(key, created.body.id);
    expect(video).toMatchObject({ status: 'completed', progress: 100, error: null, url: expect.stringContaining(`/v1/videos/${video.id}/content`) });
    // Downloaded from the url the video names, as a customer would.
    const content = await conformingFetch(get().url, video.url, { headers: { authorization: `Bearer ${key}` } });
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    expect(Buffer.from(await content.arrayBuffer()).equals(mp4)).toBe(true);

    // The capture follows the recorded completion.
    await eventually(async () => expect(await balance(key)).toEqual({ available: 10_000_000 - price, reserved: 0 }));
    const ledger = await ledgerFor(orgId, video.id);
    expect(ledger.map((e) => [e.type, micros(e.charged)]).sort()).toEqual([
      ['capture', price],
      ['reservation', 0],
    ]);
    return video;
  }

  /** A chat-2 answer, whole: the provider's text and usage, charged exactly usage × 0.08 USD / 1K tokens. */
  async function expectChat(text: string, usage: Record<string, number>) {
    const { key, orgId } = await newCustomer();
    const before = await balance(key);
    const res = await api().call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages: hello, max_tokens: 64 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'chat.completion', model: 'chat-2', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] });
    expect(res.body.usage).toEqual(usage);
    expect(await balance(key)).toEqual({ available: before.available - usage.total_tokens! * MICROS_PER_TOKEN, reserved: 0 });
    expect((await ledgerFor(orgId, res.body.id)).filter((e) => e.type === 'capture').map((e) => micros(e.charged))).toEqual([usage.total_tokens! * MICROS_PER_TOKEN]);
    return res.body;
  }

  /** A chat-2 answer, streamed, with the usage chunk asked for: the same text, usage and charge. */
  async function expectStreamedChat(text: string, usage: Record<string, number>) {
    const { key, orgId } = await newCustomer();
    const before = await balance(key);
    const chunks = await streamChat(key);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(text);
    expect(chunks.at(-2).choices).toEqual([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage });
    expect(await balance(key)).toEqual({ available: before.available - usage.total_tokens! * MICROS_PER_TOKEN, reserved: 0 });
    expect((await ledgerFor(orgId, chunks[0].id)).filter((e) => e.type === 'capture').map((e) => micros(e.charged))).toEqual([usage.total_tokens! * MICROS_PER_TOKEN]);
  }

  /** The chunks of one streamed chat-2 answer (with its usage chunk), after checking it ended with [DONE]. */
  async function streamChat(key: string, body: Record<string, unknown> = {}) {
    const res = await conformingFetch(get().url, `${get().url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', messages: hello, max_tokens: 64, stream: true, stream_options: { include_usage: true }, ...body }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await readSse(res);
    expect(events.at(-1)).toEqual({ raw: '[DONE]' });
    return events.slice(0, -1).map((e) => e.json);
  }

  return { api, newCustomer, balance, ledgerFor, eventually, createVideo, finished, expectVideoCompletes, expectChat, expectStreamedChat, streamChat };
}

/**
 * GEMINI_BASE_URL is one origin for chat (generateContent) and Veo (predictLongRunning, operations, files): this
 * forwards each path to the fake that serves it, keeping the Host header so that the file URI Veo's fake answers
 * names this origin too.
 */
async function geminiOrigin(chat: string, veo: string) {
  const server = createServer((req, res) => {
    const target = /:(generateContent|streamGenerateContent)(\?|$)/.test(req.url ?? '') ? chat : veo;
    const forwarded = httpRequest(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('only GEMINI_API_KEY: Veo serves video-2, Gemini serves chat-2', () => {
  let service: RunningService;
  let chat: FakeGemini;
  let veo: FakeGeminiVeo;
  let origin: Awaited<ReturnType<typeof geminiOrigin>>;
  const c = customerOf(() => service);
  const text = 'Plant beds together, then share the harvest.';
  // Gemini counts thinking apart from the answer; both are output tokens, and the total is their sum.
  const usage = { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 };

  beforeAll(async () => {
    chat = await startFakeGemini();
    chat.script = [
      { text: 'Plant beds together, ' },
      { text: 'then share the harvest.' },
      { finish: 'STOP' },
      { usage: { promptTokenCount: 12, candidatesTokenCount: 7, thoughtsTokenCount: 2, totalTokenCount: 21 } },
    ];
    veo = await startFakeGeminiVeo(GEMINI_KEY, mp4);
    origin = await geminiOrigin(chat.baseUrl, veo.baseUrl);
    service = await start({ GEMINI_API_KEY: GEMINI_KEY, GEMINI_BASE_URL: origin.url });
  });
  afterAll(async () => {
    await service?.stop();
    await origin?.close();
    await Promise.all([chat?.close(), veo?.close()]);
  });

  it.each(['4', '8'] as const)('makes a %s-second video-2 through Veo: completed, its MP4 downloaded, charged its price once', async (seconds) => {
    veo.requests.length = 0;
    await c.expectVideoCompletes(seconds);
    expect(veo.requests.filter((r) => r.method === 'POST').map((r) => r.path)).toEqual(['/v1beta/models/veo-3.1-fast-generate-preview:predictLongRunning']);
    expect(veo.requests.some((r) => /^\/v1beta\/files\/\w+:download$/.test(r.path))).toBe(true);
  });

  it('refuses a 12-second video-2, which Veo does not make, with 400 unsupported_parameter, charging nothing', async () => {
    const { key } = await c.newCustomer();
    veo.requests.length = 0;
    const res = await c.createVideo(key, { seconds: '12' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param: 'seconds' });
    expect(await c.balance(key)).toEqual({ available: 10_000_000, reserved: 0 });
    expect((await c.api().call('GET', '/v1/videos', { token: key })).body.data).toEqual([]);
    expect(veo.requests).toEqual([]);
  });

  it('answers chat-2 through Gemini with the usage Gemini reported, charged exactly', async () => {
    chat.requests.length = 0;
    await c.expectChat(text, usage);
    expect(chat.requests.map((r) => r.url)).toEqual(['/v1beta/models/gemini-3.1-flash-lite:generateContent']);
    expect(chat.requests[0]!.headers['x-goog-api-key']).toBe(GEMINI_KEY);
  });

  it('streams chat-2 through Gemini with the usage Gemini reported, charged exactly', async () => {
    chat.requests.length = 0;
    await c.expectStreamedChat(text, usage);
    expect(chat.requests.map((r) => r.url)).toEqual(['/v1beta/models/gemini-3.1-flash-lite:streamGenerateContent?alt=sse']);
  });
});

describe('only FAL_KEY for video (fal) and only ANTHROPIC_API_KEY for chat (Anthropic)', () => {
  let service: RunningService;
  let fal: FakeFal;
  let anthropic: FakeAnthropic;
  const c = customerOf(() => service);
  const text = 'Plant beds together, then share the harvest.';
  const usage = { prompt_tokens: 14, completion_tokens: 8, total_tokens: 22 };

  beforeAll(async () => {
    fal = await startFakeFal(FAL_KEY, mp4);
    anthropic = await startFakeAnthropic();
    anthropic.reply = { answer: { text: ['Plant beds together, ', 'then share the harvest.'], stopReason: 'end_turn', usage: { input_tokens: 14, output_tokens: 8 } } };
    service = await start({ FAL_KEY, FAL_BASE_URL: fal.url, ANTHROPIC_API_KEY: ANTHROPIC_KEY, ANTHROPIC_BASE_URL: anthropic.baseUrl });
  });
  afterAll(async () => {
    await service?.stop();
    await Promise.all([fal?.close(), anthropic?.close()]);
  });

  it('makes a video-2 through fal: completed, its MP4 downloaded, charged its price once', async () => {
    fal.requests.length = 0;
    await c.expectVideoCompletes('8');
    expect(fal.requests.filter((r) => r.method === 'POST').map((r) => r.path)).toEqual(['/fal-ai/bytedance/seedance/v1/pro/fast/text-to-video']);
    expect(fal.requests.some((r) => r.path.startsWith('/files/'))).toBe(true);
  });

  it('fails a video whose fal job fails, with a spec error code and none of fal’s words, and refunds it in full', async () => {
    const { key, orgId } = await c.newCustomer();
    // fal reports a failed generation as COMPLETED, its result answering the runner's typed error.
    fal.plan({
      failWith: {
        status: 500,
        body: { detail: 'Runner crashed', error_type: 'runner_server_error' },
        headers: { 'x-fal-error-type': 'runner_server_error' },
      },
    });
    const created = await c.createVideo(key, { seconds: '4' });
    expect(created.status).toBe(200);
    expect(await c.balance(key)).toEqual({ available: 9_600_000, reserved: 400_000 });
    const video = await c.finished(key, created.body.id);
    expect(video).toMatchObject({ status: 'failed', url: null, error: { code: 'generation_failed', message: expect.any(String) } });
    expect(video.error.message).not.toMatch(/Runner|runner_server_error/);
    await c.eventually(async () => expect(await c.balance(key)).toEqual({ available: 10_000_000, reserved: 0 }));
    expect((await c.ledgerFor(orgId, video.id)).map((e) => [e.type, micros(e.charged)]).sort()).toEqual([
      ['release', 0],
      ['reservation', 0],
    ]);
  });

  it('answers chat-2 through Anthropic with the usage Anthropic reported, charged exactly', async () => {
    anthropic.requests.length = 0;
    await c.expectChat(text, usage);
    expect(anthropic.requests).toEqual([
      expect.objectContaining({ method: 'POST', path: '/v1/messages', body: expect.objectContaining({ model: 'claude-haiku-5-5', max_tokens: 64 }) }),
    ]);
    expect(anthropic.requests[0]!.headers.authorization).toBe(`Bearer ${ANTHROPIC_KEY}`);
  });

  it('streams chat-2 through Anthropic with the usage Anthropic reported, charged exactly', async () => {
    anthropic.requests.length = 0;
    await c.expectStreamedChat(text, usage);
    expect(anthropic.requests.map((r) => r.body.stream)).toEqual([true]);
  });

  it('refuses temperature with 400 unsupported_parameter, since no deployment here takes it, charging nothing', async () => {
    const { key } = await c.newCustomer();
    anthropic.requests.length = 0;
    for (const stream of [false, true]) {
      const res = await c.api().call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages: hello, temperature: 0.7, stream } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param: 'temperature' });
    }
    expect(await c.balance(key)).toEqual({ available: 10_000_000, reserved: 0 });
    expect(anthropic.requests).toEqual([]);
  });
});

describe('only REPLICATE_API_TOKEN for video (Replicate) and only OPENAI_API_KEY for chat (OpenAI)', () => {
  let service: RunningService;
  let replicate: FakeReplicate;
  let openai: FakeUpstream;
  const c = customerOf(() => service);
  const text = 'Plant beds together, then share the harvest.';
  const usage = { prompt_tokens: 13, completion_tokens: 8, total_tokens: 21 };

  beforeAll(async () => {
    replicate = await startFakeReplicate(REPLICATE_TOKEN, mp4);
    openai = await startFakeUpstream();
    openai.script = [{ content: 'Plant beds together, ' }, { content: 'then share the harvest.' }, { finish: 'stop' }, { usage }];
    service = await start({ REPLICATE_API_TOKEN: REPLICATE_TOKEN, REPLICATE_BASE_URL: replicate.url, OPENAI_API_KEY: OPENAI_KEY, OPENAI_BASE_URL: openai.baseUrl });
  });
  afterAll(async () => {
    await service?.stop();
    await Promise.all([replicate?.close(), openai?.close()]);
  });

  it('makes a video-2 through Replicate: completed, its MP4 downloaded, charged its price once', async () => {
    replicate.requests.length = 0;
    await c.expectVideoCompletes('4');
    expect(replicate.requests.filter((r) => r.method === 'POST').map((r) => r.path)).toEqual(['/v1/models/bytedance/seedance-2.0-fast/predictions']);
    expect(replicate.requests.some((r) => r.path.endsWith('/output.mp4'))).toBe(true);
  });

  // OPENAI_BASE_URL names a server that is not OpenAI's own: it is sent `max_tokens`, which OpenAI-compatible
  // servers take (only api.openai.com gets `max_completion_tokens`).
  it('answers chat-2 through OpenAI with the usage it reported, charged exactly, sending max_tokens', async () => {
    openai.requests.length = 0;
    openai.authorizations.length = 0;
    await c.expectChat(text, usage);
    expect(openai.requests).toEqual([expect.objectContaining({ model: 'gpt-5.4-mini', max_tokens: 64 })]);
    expect(openai.requests[0]).not.toHaveProperty('max_completion_tokens');
    expect(openai.authorizations).toEqual([`Bearer ${OPENAI_KEY}`]);
  });

  it('streams chat-2 through OpenAI with the usage it reported, charged exactly', async () => {
    openai.requests.length = 0;
    await c.expectStreamedChat(text, usage);
    expect(openai.requests).toEqual([expect.objectContaining({ model: 'gpt-5.4-mini', max_tokens: 64, stream: true, stream_options: { include_usage: true } })]);
  });
});

describe('two providers, the first failing: each request fails over to the second', () => {
  let service: RunningService;
  let openai: FakeUpstream;
  let anthropic: FakeAnthropic;
  let veo: FakeGeminiVeo;
  let fal: FakeFal;
  const c = customerOf(() => service);
  const text = 'Plant beds together, then share the harvest.';

  beforeAll(async () => {
    openai = await startFakeUpstream();
    openai.failWith = 500;
    anthropic = await startFakeAnthropic();
    anthropic.reply = { answer: { text: ['Plant beds together, ', 'then share the harvest.'], stopReason: 'end_turn', usage: { input_tokens: 14, output_tokens: 8 } } };
    veo = await startFakeGeminiVeo(GEMINI_KEY, mp4);
    fal = await startFakeFal(FAL_KEY, mp4);
    // Gemini's chat deployment comes after Anthropic's, and Anthropic answers: this origin needs only Veo's paths.
    service = await start({
      OPENAI_API_KEY: OPENAI_KEY,
      OPENAI_BASE_URL: openai.baseUrl,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      ANTHROPIC_BASE_URL: anthropic.baseUrl,
      GEMINI_API_KEY: GEMINI_KEY,
      GEMINI_BASE_URL: veo.baseUrl,
      FAL_KEY,
      FAL_BASE_URL: fal.url,
    });
  });
  afterAll(async () => {
    await service?.stop();
    await Promise.all([openai?.close(), anthropic?.close(), veo?.close(), fal?.close()]);
  });

  it('serves 20 chat requests, streamed or not, through Anthropic while OpenAI answers 500, each charged exactly once', async () => {
    const { key, orgId } = await c.newCustomer();
    const before = await c.balance(key);
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const messages = [{ role: 'user', content: `Question number ${i}: how do community gardens start?` }];
        if (i % 2 === 0) {
          const res = await c.api().call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages, max_tokens: 64 } });
          expect(res.status).toBe(200);
          expect(res.body.choices[0].message.content).toBe(text);
          return { id: res.body.id as string, usage: res.body.usage };
        }
        const chunks = await c.streamChat(key, { messages });
        expect(chunks.map((ch) => ch.choices[0]?.delta.content ?? '').join('')).toBe(text);
        return { id: chunks[0].id as string, usage: chunks.at(-1).usage };
      }),
    );
    for (const { usage } of answers) expect(usage).toEqual({ prompt_tokens: 14, completion_tokens: 8, total_tokens: 22 });
    expect(new Set(answers.map((a) => a.id)).size).toBe(20);
    expect(anthropic.requests).toHaveLength(20);
    // OpenAI was tried first (until its breaker opened) and never answered.
    expect(openai.requests.length).toBeGreaterThan(0);

    expect(await c.balance(key)).toEqual({ available: before.available - 20 * 22 * MICROS_PER_TOKEN, reserved: 0 });
    const ledger = (await c.api().admin('GET', `/organizations/${orgId}/ledger?limit=100`)).body.data as any[];
    for (const { id } of answers) {
      expect(ledger.filter((e) => e.reference === id && e.type === 'capture').map((e) => micros(e.charged))).toEqual([22 * MICROS_PER_TOKEN]);
    }
    expect(ledger.filter((e) => e.type === 'capture')).toHaveLength(20);
  });

  it('makes a video-2 through fal when Veo refuses the submission with 503', async () => {
    veo.fail('submit', { kind: 'status', status: 503, statusText: 'UNAVAILABLE', message: 'The service is currently unavailable.' });
    fal.requests.length = 0;
    veo.requests.length = 0;
    await c.expectVideoCompletes('8');
    // Veo was asked once (and failed), fal made the video.
    expect(veo.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1beta/models/veo-3.1-fast-generate-preview:predictLongRunning']);
    expect(fal.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
    expect(fal.requests.some((r) => r.path.startsWith('/files/'))).toBe(true);
  });
});

describe("models of the operator's own, from a catalog: listed, served and charged at their own price", () => {
  let service: RunningService;
  let dir: string;
  const c = customerOf(() => service);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-catalog-'));
    const catalog = join(dir, 'models.yaml');
    await writeFile(
      catalog,
      [
        'models:',
        '  budget-chat:',
        '    type: chat',
        '    price: { per_1k_tokens: 0.02 }',
        '    deployments: [{ id: sim, provider: simulator, model: chat-sim }]',
        '  clip-fast:',
        '    type: video',
        '    price: { per_second: 0.05 }',
        '    deployments: [{ id: sim, provider: simulator, model: simulator }]',
      ].join('\n'),
    );
    service = await start({ MODELS_FILE: catalog, SIM_VIDEO_DURATION_MS: '0' });
  });
  afterAll(async () => {
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists them after the spec models in GET /v1/models, and retrieves each', async () => {
    const { key } = await c.newCustomer();
    const list = await c.api().call('GET', '/v1/models', { token: key });
    expect(list.body.data.map((m: { id: string }) => m.id)).toEqual(['chat-2', 'video-2', 'video-2-pro', 'budget-chat', 'clip-fast']);
    expect((await c.api().call('GET', '/v1/models/budget-chat', { token: key })).body).toMatchObject({ id: 'budget-chat', object: 'model' });
  });

  it('answers a chat under its own name and charges its own price per token', async () => {
    const { key } = await c.newCustomer();
    const before = await c.balance(key);
    const res = await c.api().call('POST', '/v1/chat/completions', { token: key, body: { model: 'budget-chat', messages: hello, max_tokens: 32 } });
    expect(res.status).toBe(200);
    expect(res.body.model).toBe('budget-chat');
    // 0.02 USD per 1,000 tokens: 20 micro-USD a token, not chat-2's 80.
    expect(await c.balance(key)).toEqual({ available: before.available - res.body.usage.total_tokens * 20, reserved: 0 });
  });

  it('makes a video of its own model at its own price per second', async () => {
    const { key } = await c.newCustomer();
    const created = await c.createVideo(key, { model: 'clip-fast', seconds: '4' });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ model: 'clip-fast', 'x-cost': { amount: 0.2, currency: 'usd' } });
    expect(await c.finished(key, created.body.id)).toMatchObject({ status: 'completed', model: 'clip-fast' });
    await c.eventually(async () => expect(await c.balance(key)).toEqual({ available: 9_800_000, reserved: 0 }));
  });

  it('refuses a model it does not serve with 400 invalid_model, for chat and video alike', async () => {
    const { key } = await c.newCustomer();
    const chat = await c.api().call('POST', '/v1/chat/completions', { token: key, body: { model: 'budget-chat-2', messages: hello } });
    expect(chat.status).toBe(400);
    expect(chat.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_model', param: 'model' });
    const video = await c.createVideo(key, { model: 'clip-slow', seconds: '4' });
    expect(video.status).toBe(400);
    expect(video.body.error).toMatchObject({ code: 'invalid_model', param: 'model' });
    expect(await c.balance(key)).toEqual({ available: 10_000_000, reserved: 0 });
  });
});
