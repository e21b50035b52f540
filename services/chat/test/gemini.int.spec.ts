import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GeminiChatProvider } from '../src/adapters/gemini';
import type { GenerationEvent, GenerationRequest } from '../src/application/ports';
import { type FakeGemini, type Failure, googleError, startFakeGemini, type Step } from './fakes/gemini';

const KEY = 'AIza-test-key-never-shown';
const MODEL = 'gemini-test';

describe('Gemini chat provider (official SDK against a local fake)', () => {
  let gemini: FakeGemini;
  let provider: GeminiChatProvider;

  const request: GenerationRequest = {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
      { role: 'user', content: 'And?' },
    ],
    maxTokens: 50,
    temperature: 0.3,
    stop: ['END'],
    stream: true,
  };

  beforeAll(async () => {
    gemini = await startFakeGemini();
    provider = new GeminiChatProvider({ apiKey: KEY, baseUrl: gemini.baseUrl, model: MODEL, timeoutMs: 5_000 });
  });
  afterAll(() => gemini.close());
  beforeEach(() => {
    gemini.requests.length = 0;
    gemini.failure = undefined;
    gemini.script = [{ text: 'Hello' }, { finish: 'STOP' }];
  });

  const collect = async (
    changes: Partial<GenerationRequest> = {},
    signal = new AbortController().signal,
    using = provider,
  ): Promise<GenerationEvent[]> => {
    const events: GenerationEvent[] = [];
    for await (const event of using.generate({ ...request, ...changes }, signal)) events.push(event);
    return events;
  };

  /** The error a call ends with, and the events it yielded before. */
  const failureOf = async (changes: Partial<GenerationRequest> = {}, using = provider) => {
    const events: GenerationEvent[] = [];
    try {
      for await (const event of using.generate({ ...request, ...changes }, new AbortController().signal)) events.push(event);
    } catch (error) {
      expect(error).toBeInstanceOf(ProviderError);
      return { error: error as ProviderError, events };
    }
    throw new Error(`no failure; events: ${JSON.stringify(events)}`);
  };

  describe('request translation', () => {
    it('streams from the model path with the key header, system messages as systemInstruction and assistant as model', async () => {
      await collect();
      expect(gemini.requests).toHaveLength(1);
      const [sent] = gemini.requests;
      expect(sent?.method).toBe('POST');
      expect(sent?.url).toBe(`/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`);
      expect(sent?.headers['x-goog-api-key']).toBe(KEY);
      expect(sent?.body).toEqual({
        contents: [
          { role: 'user', parts: [{ text: 'Hi' }] },
          { role: 'model', parts: [{ text: 'Hello!' }] },
          { role: 'user', parts: [{ text: 'And?' }] },
        ],
        systemInstruction: { parts: [{ text: 'Be brief.' }] },
        generationConfig: {
          maxOutputTokens: 50,
          temperature: 0.3,
          stopSequences: ['END'],
          thinkingConfig: { thinkingLevel: 'MINIMAL' },
        },
      });
    });

    it('sends no temperature, no stop sequences and no systemInstruction when the customer named none', async () => {
      await collect({ messages: [{ role: 'user', content: 'Hi' }], temperature: undefined, stop: [] });
      expect(gemini.requests[0]?.body).toEqual({
        contents: [{ role: 'user', parts: [{ text: 'Hi' }] }],
        generationConfig: { maxOutputTokens: 50, thinkingConfig: { thinkingLevel: 'MINIMAL' } },
      });
    });

    it('merges adjacent messages of one role into one turn, since Gemini wants turns to alternate', async () => {
      await collect({
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'One' },
          { role: 'user', content: 'Two' },
          { role: 'system', content: 'Answer in French.' },
          { role: 'assistant', content: 'Un' },
          { role: 'assistant', content: 'Deux' },
          { role: 'user', content: 'Trois?' },
        ],
      });
      expect(gemini.requests[0]?.body.contents).toEqual([
        { role: 'user', parts: [{ text: 'One' }, { text: 'Two' }] },
        { role: 'model', parts: [{ text: 'Un' }, { text: 'Deux' }] },
        { role: 'user', parts: [{ text: 'Trois?' }] },
      ]);
      expect(gemini.requests[0]?.body.systemInstruction).toEqual({ parts: [{ text: 'Be brief.' }, { text: 'Answer in French.' }] });
    });

    it('asks generateContent, without a stream, when the caller needs only the whole answer', async () => {
      await collect({ stream: false });
      expect(gemini.requests.map((r) => r.url)).toEqual([`/v1beta/models/${MODEL}:generateContent`]);
      expect(gemini.requests[0]?.headers['x-goog-api-key']).toBe(KEY);
    });
  });

  describe('answers', () => {
    const answer: Step[] = [
      { text: 'Hel' },
      { usage: { promptTokenCount: 12, candidatesTokenCount: 1, totalTokenCount: 13 } },
      { text: 'lo' },
      { text: ' world' },
      { finish: 'STOP' },
      { usage: { promptTokenCount: 12, candidatesTokenCount: 3, thoughtsTokenCount: 4, totalTokenCount: 19 } },
    ];

    it('relays a streamed answer chunk by chunk, then finishes with the last usage, thinking counted as completion', async () => {
      gemini.script = answer;
      expect(await collect()).toEqual([
        { type: 'content', text: 'Hel' },
        { type: 'content', text: 'lo' },
        { type: 'content', text: ' world' },
        { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 } },
      ]);
    });

    it('yields a whole answer as one content event, with the same usage', async () => {
      gemini.script = answer;
      expect(await collect({ stream: false })).toEqual([
        { type: 'content', text: 'Hello world' },
        { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 } },
      ]);
    });

    it.each([
      ['STOP', 'stop'],
      ['MAX_TOKENS', 'length'],
    ] as const)('maps finishReason %s to %s, streamed and whole', async (reason, expected) => {
      gemini.script = [{ text: 'Hi' }, { finish: reason }];
      expect((await collect()).at(-1)).toEqual({ type: 'finish', finishReason: expected });
      expect((await collect({ stream: false })).at(-1)).toEqual({ type: 'finish', finishReason: expected });
    });

    it('ends an answer Gemini stopped at its per-request limit (CONTINUATION) as length, without the SDK asking again', async () => {
      gemini.script = [{ text: 'Hel' }, { finish: 'CONTINUATION', continuationToken: 'resume-here' }];
      expect((await collect()).at(-1)).toEqual({ type: 'finish', finishReason: 'length' });
      expect((await collect({ stream: false })).at(-1)).toEqual({ type: 'finish', finishReason: 'length' });
      expect(gemini.requests).toHaveLength(2);
    });

    it.each(['SAFETY', 'RECITATION', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'SPII'])(
      'ends an answer Gemini withheld the rest of (%s) with content_filter, after what came, streamed and whole',
      async (reason) => {
        gemini.script = [{ text: 'Par' }, { finish: reason }];
        expect(await collect()).toEqual([
          { type: 'content', text: 'Par' },
          { type: 'finish', finishReason: 'content_filter' },
        ]);
        expect((await collect({ stream: false })).at(-1)).toEqual({ type: 'finish', finishReason: 'content_filter' });
      },
    );

    it('treats an unexplained stop (OTHER) as worth another try', async () => {
      gemini.script = [{ text: 'Par' }, { finish: 'OTHER' }];
      expect((await failureOf()).error.kind).toBe('retryable');
    });

    it('refuses a prompt Gemini blocked, streamed or whole, without yielding anything', async () => {
      gemini.script = [{ blocked: 'PROHIBITED_CONTENT' }, { usage: { promptTokenCount: 9, totalTokenCount: 9 } }];
      for (const stream of [true, false]) {
        const { error, events } = await failureOf({ stream });
        expect(events).toEqual([]);
        expect(error.kind).toBe('request');
        expect(error.status).toBeUndefined();
        expect(error.message).not.toContain('PROHIBITED_CONTENT');
        expect(error.detail).toContain('PROHIBITED_CONTENT');
      }
      expect(gemini.requests).toHaveLength(2);
    });
  });

  describe('agent features', () => {
    const weather = {
      type: 'function' as const,
      function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    };
    const time = { type: 'function' as const, function: { name: 'get_time' } };
    const plain = { temperature: undefined, stop: [] };

    it('sends tools, a tool round trip, an image, developer instructions, a JSON schema, n, seed and top_p in the documented shapes', async () => {
      gemini.script = [{ text: '{}' }, { finish: 'STOP' }, { text: '{}', candidate: 1 }, { finish: 'STOP', candidate: 1 }];
      await collect({
        ...plain,
        stream: false,
        messages: [
          { role: 'developer', content: 'Use tools.' },
          { role: 'user', content: [{ type: 'text', text: 'Weather here?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } }] },
          {
            role: 'assistant',
            content: 'Checking.',
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '18°C' },
          { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '14:00' }] },
          { role: 'user', content: 'Thanks.' },
        ],
        tools: [weather, time],
        toolChoice: { type: 'function', function: { name: 'get_time' } },
        parallelToolCalls: true,
        responseFormat: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } } } } },
        n: 2,
        seed: 7,
        options: { top_p: 0.5 },
      });
      expect(gemini.requests).toHaveLength(1);
      expect(gemini.requests[0]?.body).toEqual({
        contents: [
          { role: 'user', parts: [{ text: 'Weather here?' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] },
          {
            role: 'model',
            parts: [
              { text: 'Checking.' },
              { functionCall: { id: 'call_1', name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'skip_thought_signature_validator' },
              { functionCall: { id: 'call_2', name: 'get_time', args: {} } },
            ],
          },
          {
            role: 'user',
            parts: [
              { functionResponse: { id: 'call_1', name: 'get_weather', response: { output: '18°C' } } },
              { functionResponse: { id: 'call_2', name: 'get_time', response: { output: '14:00' } } },
              { text: 'Thanks.' },
            ],
          },
        ],
        systemInstruction: { parts: [{ text: 'Use tools.' }] },
        tools: [
          {
            functionDeclarations: [
              { name: 'get_weather', description: 'Weather for a city', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
              { name: 'get_time' },
            ],
          },
        ],
        toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_time'] } },
        generationConfig: {
          maxOutputTokens: 50,
          topP: 0.5,
          candidateCount: 2,
          seed: 7,
          responseMimeType: 'application/json',
          responseJsonSchema: { type: 'object', properties: { a: { type: 'string' } } },
          thinkingConfig: { thinkingLevel: 'MINIMAL' },
        },
      });
    });

    it.each([
      ['none', [weather], { mode: 'NONE' }],
      ['auto', [weather], { mode: 'AUTO' }],
      ['required', [weather], { mode: 'ANY' }],
      [undefined, [weather], undefined],
      [undefined, [{ ...weather, function: { ...weather.function, strict: true } }], { mode: 'VALIDATED' }],
    ] as const)('maps tool_choice %j (tools %j) to functionCallingConfig %j', async (toolChoice, tools, expected) => {
      await collect({ ...plain, tools: [...tools], ...(toolChoice ? { toolChoice } : {}) });
      expect(gemini.requests[0]?.body.toolConfig?.functionCallingConfig).toEqual(expected);
    });

    it('asks JSON of a json_object answer', async () => {
      await collect({ ...plain, responseFormat: { type: 'json_object' } });
      expect(gemini.requests[0]?.body.generationConfig).toEqual({ maxOutputTokens: 50, responseMimeType: 'application/json', thinkingConfig: { thinkingLevel: 'MINIMAL' } });
    });

    const calls: Step[] = [
      { text: 'Checking.' },
      { call: { id: 'fc-1', name: 'get_weather', args: { city: 'Paris' } } },
      { call: { name: 'get_time', args: {} } },
      { finish: 'STOP' },
      { usage: { promptTokenCount: 20, candidatesTokenCount: 9, totalTokenCount: 29 } },
    ];

    it.each([true, false])('gives function calls as tool calls (ids kept, or made), finishing with tool_calls (stream: %s)', async (stream) => {
      gemini.script = calls;
      const events = await collect({ ...plain, stream, tools: [weather, time] });
      expect(events).toEqual([
        { type: 'content', text: 'Checking.' },
        { type: 'tool_call', fragment: { call: 0, id: 'fc-1', name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { type: 'tool_call', fragment: { call: 1, id: expect.stringMatching(/^call_[0-9a-f]{24}$/), name: 'get_time', arguments: '{}' } },
        { type: 'finish', finishReason: 'tool_calls', usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 } },
      ]);
    });

    it.each([true, false])('gives n candidates as n choices, each ending on its own, the usage on the last (stream: %s)', async (stream) => {
      gemini.script = [
        { text: 'One', candidate: 0 },
        { text: 'Two', candidate: 1 },
        { finish: 'STOP', candidate: 0 },
        { finish: 'MAX_TOKENS', candidate: 1 },
        { usage: { promptTokenCount: 5, candidatesTokenCount: 4, totalTokenCount: 9 } },
      ];
      const events = await collect({ ...plain, stream, n: 2 });
      expect(events).toEqual([
        { type: 'content', text: 'One' },
        { type: 'content', text: 'Two', index: 1 },
        { type: 'finish', finishReason: 'stop' },
        { type: 'finish', finishReason: 'length', index: 1, usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } },
      ]);
    });

    it.each<[string, Partial<GenerationRequest>]>([
      ['an https image (Gemini needs its MIME type)', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }],
      ['parallel_tool_calls: false (no such switch)', { tools: [weather], parallelToolCalls: false }],
      ['log probabilities', { logprobs: { top: 2 } }],
      ['a penalty', { options: { presence_penalty: 0.5 } }],
      ['an end-user id', { options: { user: 'u' } }],
      ['a tool result whose call is not in the conversation', { messages: [{ role: 'tool', tool_call_id: 'nowhere', content: 'x' }] }],
      ['tool-call arguments that are not JSON', { messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'nope' } }] }] }],
    ])('refuses %s itself, sending nothing', async (_, changes) => {
      const { error } = await failureOf(changes);
      expect(error.kind).toBe('request');
      expect(gemini.requests).toHaveLength(0);
    });
  });

  describe('HTTP failures', () => {
    const SAID = 'Secret upstream wording about project 1234';
    const cases: Array<[string, Failure, { kind: string; status: number; retryAfterMs: number | undefined }]> = [
      ['a malformed request', googleError(400, 'INVALID_ARGUMENT', SAID), { kind: 'request', status: 400, retryAfterMs: undefined }],
      [
        'a wrong key (400 with API_KEY_INVALID)',
        googleError(400, 'INVALID_ARGUMENT', SAID, [
          { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
        ]),
        { kind: 'deployment', status: 400, retryAfterMs: undefined },
      ],
      ['a project without billing', googleError(400, 'FAILED_PRECONDITION', SAID), { kind: 'deployment', status: 400, retryAfterMs: undefined }],
      ['spent prepaid credit', googleError(402, 'RESOURCE_EXHAUSTED', SAID), { kind: 'deployment', status: 402, retryAfterMs: undefined }],
      ['401', googleError(401, 'UNAUTHENTICATED', SAID), { kind: 'deployment', status: 401, retryAfterMs: undefined }],
      ['403', googleError(403, 'PERMISSION_DENIED', SAID), { kind: 'deployment', status: 403, retryAfterMs: undefined }],
      ['an unknown model (404)', googleError(404, 'NOT_FOUND', SAID), { kind: 'deployment', status: 404, retryAfterMs: undefined }],
      [
        'a rate limit with a RetryInfo delay',
        googleError(429, 'RESOURCE_EXHAUSTED', SAID, [
          { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel' }] },
          { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '37.5s' },
        ]),
        { kind: 'retryable', status: 429, retryAfterMs: 37_500 },
      ],
      ['500', googleError(500, 'INTERNAL', SAID), { kind: 'retryable', status: 500, retryAfterMs: undefined }],
      [
        '503 with Retry-After',
        { ...googleError(503, 'UNAVAILABLE', SAID), headers: { 'retry-after': '7' } },
        { kind: 'retryable', status: 503, retryAfterMs: 7_000 },
      ],
    ];

    it.each(cases)('%s: kind, status and wait, once, without the provider text or the key in the message', async (_, failure, expected) => {
      gemini.failure = failure;
      for (const stream of [true, false]) {
        gemini.requests.length = 0;
        const { error } = await failureOf({ stream });
        expect({ kind: error.kind, status: error.status, retryAfterMs: error.retryAfterMs }).toEqual(expected);
        expect(error.message).not.toContain(SAID);
        expect(error.message).not.toContain(KEY);
        expect(error.detail).toContain(SAID);
        expect(error.detail).not.toContain(KEY);
        // The SDK retries nothing itself: the router decides.
        expect(gemini.requests).toHaveLength(1);
      }
    });

    it('fails over on an error event inside a stream, after the text so far', async () => {
      gemini.script = [{ text: 'Hel' }, { error: { code: 503, message: SAID, status: 'UNAVAILABLE' } }];
      const { error, events } = await failureOf();
      expect(events).toEqual([{ type: 'content', text: 'Hel' }]);
      expect({ kind: error.kind, status: error.status }).toEqual({ kind: 'retryable', status: 503 });
      expect(error.message).not.toContain(SAID);
    });
  });

  describe('broken answers', () => {
    it('a stream cut mid-way is retryable, never a finished answer', async () => {
      gemini.script = [{ text: 'Hel' }, { cut: true }];
      const { error, events } = await failureOf();
      expect(events).toEqual([{ type: 'content', text: 'Hel' }]);
      expect(error.kind).toBe('retryable');
    });

    it('a stream that ends without a finish reason is retryable', async () => {
      gemini.script = [{ text: 'Hel' }, { text: 'lo' }];
      const { error, events } = await failureOf();
      expect(events).toHaveLength(2);
      expect(error.kind).toBe('retryable');
    });

    it.each([true, false])('a malformed answer is retryable (stream: %s)', async (stream) => {
      gemini.script = [{ text: 'Hel' }, { garbage: true }];
      const { error } = await failureOf({ stream });
      expect(error.kind).toBe('retryable');
      expect(error.message).not.toContain('candidates');
    });

    it('a host that refuses the connection is retryable', async () => {
      const closed = await startFakeGemini();
      await closed.close();
      const nowhere = new GeminiChatProvider({ apiKey: KEY, baseUrl: closed.baseUrl, model: MODEL, timeoutMs: 5_000 });
      const { error } = await failureOf({}, nowhere);
      expect(error.kind).toBe('retryable');
      expect(error.message).toBe('Gemini could not be reached.');
    });
  });

  describe('time and cancellation', () => {
    const TIMEOUT = 400;
    let impatient: GeminiChatProvider;
    beforeAll(() => {
      impatient = new GeminiChatProvider({ apiKey: KEY, baseUrl: gemini.baseUrl, model: MODEL, timeoutMs: TIMEOUT });
    });

    const timed = async (script: Step[], stream: boolean) => {
      gemini.script = script;
      const started = performance.now();
      const outcome = await failureOf({ stream }, impatient);
      return { ...outcome, elapsed: performance.now() - started };
    };

    it.each([true, false])('a provider that never answers fails as retryable within about timeoutMs (stream: %s)', async (stream) => {
      const { error, elapsed } = await timed([{ hang: true }], stream);
      expect(error.kind).toBe('retryable');
      expect(error.message).toBe('Gemini did not answer in time.');
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT - 50);
      expect(elapsed).toBeLessThan(TIMEOUT + 1_500);
    });

    it('a stream that stalls mid-way fails as retryable within about timeoutMs of its last chunk', async () => {
      const { error, events, elapsed } = await timed([{ text: 'Hel' }, { hang: true }], true);
      expect(events).toEqual([{ type: 'content', text: 'Hel' }]);
      expect(error.kind).toBe('retryable');
      expect(elapsed).toBeLessThan(TIMEOUT + 1_500);
    });

    it('aborting mid-stream ends the iteration quietly and closes the call', async () => {
      let release = () => {};
      gemini.script = [{ text: 'Hel' }, { gate: new Promise<void>((resolve) => (release = resolve)) }, { text: 'lo' }, { finish: 'STOP' }];
      const controller = new AbortController();
      const abandoned = gemini.nextAbandoned();
      const events: GenerationEvent[] = [];
      for await (const event of provider.generate(request, controller.signal)) {
        events.push(event);
        controller.abort();
      }
      await abandoned;
      release();
      expect(events).toEqual([{ type: 'content', text: 'Hel' }]);
    });

    it('aborting while waiting for a whole answer ends quietly', async () => {
      gemini.script = [{ hang: true }];
      const controller = new AbortController();
      const abandoned = gemini.nextAbandoned();
      const iteration = collect({ stream: false }, controller.signal);
      await waitForRequest();
      controller.abort();
      expect(await iteration).toEqual([]);
      await abandoned;
    });

    it('a caller that stops reading early closes the call', async () => {
      let release = () => {};
      gemini.script = [{ text: 'Hel' }, { gate: new Promise<void>((resolve) => (release = resolve)) }, { finish: 'STOP' }];
      const abandoned = gemini.nextAbandoned();
      for await (const event of provider.generate(request, new AbortController().signal)) {
        expect(event).toEqual({ type: 'content', text: 'Hel' });
        break;
      }
      await abandoned;
      release();
    });
  });

  /** Resolves once the fake has received a request (a real round trip, no clock involved). */
  async function waitForRequest(): Promise<void> {
    while (gemini.requests.length === 0) await new Promise((resolve) => setImmediate(resolve));
  }
});
