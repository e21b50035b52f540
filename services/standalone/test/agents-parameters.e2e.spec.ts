import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Customer, customersOf, startForClients } from './agents-support';
import type { Response } from './client';
import type { RunningService } from './harness';
import { readSse } from './sse';

/**
 * Issue 27, "no parameter silently ignored": every field of the installed openai SDK's request types for Chat
 * Completions (`ChatCompletionCreateParamsBase`) and Responses (`ResponseCreateParamsBase`), read from its .d.ts
 * files when the test runs, is sent with a plausible value and must be either honoured (2xx, and then this file
 * says how that shows, where the simulator can show it) or refused with 400 `unsupported_parameter` naming it. A
 * field the SDK gains fails here until it is classified below. Requests use a test key (simulated, free).
 */

const SDK_DIR = dirname(createRequire(import.meta.url).resolve('openai'));
const SDK_VERSION = (JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')) as { version: string }).version;

/** The property names of `export interface <name> {…}`: the lines indented one level (4 spaces) inside it. */
function interfaceFields(file: string, name: string): string[] {
  const text = readFileSync(file, 'utf8');
  const head = new RegExp(`^export interface ${name}\\b[^{\\n]*\\{\\s*$`, 'm').exec(text);
  if (!head) throw new Error(`no interface ${name} in ${file}`);
  const fields: string[] = [];
  for (const line of text.slice(head.index + head[0].length).split('\n')) {
    if (/^\}/.test(line)) return fields;
    const property = /^ {4}(?:readonly )?(['"]?)([A-Za-z_$][\w$-]*)\1\??:/.exec(line);
    if (property) fields.push(property[2]!);
  }
  throw new Error(`interface ${name} in ${file} does not end`);
}

const CHAT_FIELDS = interfaceFields(join(SDK_DIR, 'resources/chat/completions/completions.d.ts'), 'ChatCompletionCreateParamsBase');
const RESPONSE_FIELDS = interfaceFields(join(SDK_DIR, 'resources/responses/responses.d.ts'), 'ResponseCreateParamsBase');

// ---------- what the requests carry ----------

const HELLO = 'How do community gardens change a neighbourhood?';
const WEATHER_QUESTION = 'What is the weather in Lisbon today?';
const CITY = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const CHAT_WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The current weather in a city', parameters: CITY, strict: true } };
const CHAT_TIME = { type: 'function', function: { name: 'get_time', description: 'The local time in a city', parameters: CITY, strict: true } };
const RESPONSE_WEATHER = { type: 'function', name: 'get_weather', description: 'The current weather in a city', parameters: CITY, strict: true };
const RESPONSE_TIME = { type: 'function', name: 'get_time', description: 'The local time in a city', parameters: CITY, strict: true };
const GARDEN_SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, plots: { type: 'integer', minimum: 1 }, crops: { type: 'array', items: { type: 'string' }, minItems: 1 } },
  required: ['name', 'plots', 'crops'],
  additionalProperties: false,
};
const validGarden = new Ajv2020({ strict: false }).compile(GARDEN_SCHEMA);

// ---------- the classification ----------

interface Answer extends Response {
  /** A streamed answer's `data:` payloads, parsed (`[DONE]` kept raw). */
  events: Array<{ raw: string; json?: any }>;
}

interface Case {
  /** The field's value (computed when it depends on an earlier answer). */
  value: unknown | (() => unknown);
  /** What else the request needs for the field to mean something. */
  with?: Record<string, unknown>;
  /**
   * How a 2xx shows that the field was honoured. A case without it must be refused: a 2xx would have ignored it.
   * `passedOn(why)` is for what only a provider can show (sampling, caching): the simulator shows nothing of it.
   */
  honoured?: (answer: Answer) => void | Promise<void>;
  /** The issue asks for it to be honoured: a refusal fails too. */
  required?: true;
}

/**
 * Fields only a provider acts on (sampling, caching, abuse tracking): the simulator's answer cannot show them, so
 * agents-upstream.e2e.spec.ts checks that the chat ones reach an OpenAI-compatible provider as they were sent.
 */
const passedOn = (_why: string) => (answer: Answer) => expect(answer.status).toBe(200);

const chatText = (a: Answer) => a.body.choices[0].message.content as string;
const toolCalls = (a: Answer) => (a.body.choices[0].message.tool_calls ?? []) as Array<{ function: { name: string; arguments: string } }>;
const outputText = (a: Answer) =>
  (a.body.output as any[])
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content.map((part: { text: string }) => part.text))
    .join('');
const functionCalls = (a: Answer) => (a.body.output as any[]).filter((item) => item.type === 'function_call');
const sseJson = (a: Answer) => a.events.flatMap((e) => (e.json ? [e.json] : []));

let chatBaseline: Answer;
let responseBaseline: Answer;
let api: ReturnType<typeof customersOf>['api'];
let tester: Customer;

const CHAT: Record<string, Case[]> = {
  messages: [
    { value: [{ role: 'user', content: HELLO }], required: true, honoured: (a) => expect(chatText(a).toLowerCase()).toContain('community') },
    {
      value: [
        { role: 'developer', content: 'Answer briefly.' },
        { role: 'user', content: [{ type: 'text', text: HELLO }, { type: 'image_url', image_url: { url: 'https://example.com/garden.png' } }] },
      ],
      required: true,
      // The instruction and the image are counted in the prompt.
      honoured: (a) => expect(a.body.usage.prompt_tokens).toBeGreaterThan(chatBaseline.body.usage.prompt_tokens + 3),
    },
  ],
  model: [{ value: 'chat-2', required: true, honoured: (a) => expect(a.body.model).toBe('chat-2') }],
  audio: [{ value: { voice: 'alloy', format: 'wav' } }],
  frequency_penalty: [{ value: 0.5, honoured: passedOn('sampling') }],
  function_call: [{ value: 'none' }],
  functions: [{ value: [{ name: 'get_weather', description: 'The current weather in a city', parameters: CITY }] }],
  logit_bias: [{ value: { '1734': -100 }, honoured: passedOn('sampling') }],
  logprobs: [
    {
      value: true,
      required: true,
      honoured: (a) => {
        const content = a.body.choices[0].logprobs.content as Array<{ token: string; logprob: number }>;
        expect(content.length).toBeGreaterThan(0);
        expect(content.map((t) => t.token).join('')).toBe(chatText(a));
        for (const t of content) expect(t.logprob).toBeLessThanOrEqual(0);
      },
    },
  ],
  max_completion_tokens: [
    {
      value: 5,
      required: true,
      honoured: (a) => {
        expect(a.body.choices[0].finish_reason).toBe('length');
        expect(a.body.usage.completion_tokens).toBeLessThanOrEqual(5);
      },
    },
  ],
  max_tokens: [
    {
      value: 5,
      required: true,
      honoured: (a) => {
        expect(a.body.choices[0].finish_reason).toBe('length');
        expect(a.body.usage.completion_tokens).toBeLessThanOrEqual(5);
      },
    },
  ],
  // Kept with the exchange: the session shows it on the answer.
  metadata: [
    {
      value: { topic: 'gardens' },
      honoured: async (a) => {
        const session = await api.call('GET', `/v1/chat/completions/${a.body.session_id}`, { token: tester.key });
        expect(session.body.messages.at(-1).metadata).toEqual({ topic: 'gardens' });
      },
    },
  ],
  modalities: [{ value: ['text'], honoured: (a) => expect(typeof chatText(a)).toBe('string') }, { value: ['text', 'audio'] }],
  n: [
    {
      value: 3,
      required: true,
      honoured: (a) => {
        expect(a.body.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2]);
        expect(new Set(a.body.choices.map((c: { message: { content: string } }) => c.message.content)).size).toBe(3);
      },
    },
  ],
  parallel_tool_calls: [
    {
      value: false,
      with: { tools: [CHAT_WEATHER, CHAT_TIME], tool_choice: 'required', messages: [{ role: 'user', content: 'What are the weather and the local time in Lisbon?' }] },
      required: true,
      honoured: (a) => expect(toolCalls(a)).toHaveLength(1),
    },
  ],
  prediction: [{ value: { type: 'content', content: 'Community gardens bring neighbours together.' } }],
  presence_penalty: [{ value: 0.5, honoured: passedOn('sampling') }],
  prompt_cache_key: [{ value: 'gardens-faq', honoured: passedOn('prompt caching') }],
  prompt_cache_retention: [{ value: 'in-memory', honoured: passedOn('prompt caching') }],
  reasoning_effort: [{ value: 'low', honoured: passedOn('reasoning models') }],
  response_format: [
    {
      value: { type: 'json_schema', json_schema: { name: 'garden', schema: GARDEN_SCHEMA, strict: true } },
      required: true,
      honoured: (a) => expect(validGarden(JSON.parse(chatText(a))), JSON.stringify(validGarden.errors)).toBe(true),
    },
    {
      value: { type: 'json_object' },
      with: { messages: [{ role: 'user', content: `${HELLO} Answer in JSON.` }] },
      required: true,
      honoured: (a) => expect(JSON.parse(chatText(a))).toBeTypeOf('object'),
    },
    { value: { type: 'text' }, honoured: (a) => expect(chatText(a)).toBe(chatText(chatBaseline)) },
  ],
  safety_identifier: [{ value: 'user-7f3a', honoured: passedOn('abuse tracking') }],
  seed: [
    {
      value: 42,
      required: true,
      // The simulator draws another reply for a seed, the same one each time.
      honoured: async (a) => {
        expect(chatText(a)).not.toBe(chatText(chatBaseline));
        expect(chatText(await chat({ seed: 42 }))).toBe(chatText(a));
      },
    },
  ],
  service_tier: [
    { value: 'auto', honoured: (a) => expect(chatText(a)).toBe(chatText(chatBaseline)) },
    { value: 'default', honoured: (a) => expect(chatText(a)).toBe(chatText(chatBaseline)) },
    { value: 'flex' },
  ],
  stop: [
    {
      value: () => chatText(chatBaseline).split(' ').slice(3, 5).join(' '),
      required: true,
      honoured: (a) => {
        const full = chatText(chatBaseline);
        expect(chatText(a)).toBe(full.slice(0, full.indexOf(full.split(' ').slice(3, 5).join(' '))));
        expect(a.body.choices[0].finish_reason).toBe('stop');
      },
    },
  ],
  // Sessions are the store here; false is what every completion gets, true (storing at a provider) is refused.
  store: [{ value: false, honoured: (a) => expect(chatText(a)).toBe(chatText(chatBaseline)) }, { value: true }],
  stream: [
    {
      value: true,
      required: true,
      honoured: (a) => {
        expect(a.headers.get('content-type')).toMatch(/^text\/event-stream/);
        expect(a.events.at(-1)!.raw).toBe('[DONE]');
        expect(sseJson(a).map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(chatText(chatBaseline));
      },
    },
  ],
  stream_options: [
    {
      value: { include_usage: true },
      with: { stream: true },
      required: true,
      honoured: (a) => {
        const last = sseJson(a).at(-1);
        expect(last).toMatchObject({ choices: [], usage: chatBaseline.body.usage });
      },
    },
    { value: { include_obfuscation: true }, with: { stream: true } },
  ],
  temperature: [{ value: 0.2, honoured: passedOn('sampling') }],
  tool_choice: [
    { value: 'required', with: { tools: [CHAT_WEATHER] }, required: true, honoured: (a) => expect(toolCalls(a).map((c) => c.function.name)).toEqual(['get_weather']) },
    {
      value: 'none',
      with: { tools: [CHAT_WEATHER], messages: [{ role: 'user', content: WEATHER_QUESTION }] },
      required: true,
      honoured: (a) => {
        expect(toolCalls(a)).toEqual([]);
        expect(chatText(a).toLowerCase()).toContain('lisbon');
      },
    },
    {
      value: { type: 'function', function: { name: 'get_time' } },
      with: { tools: [CHAT_WEATHER, CHAT_TIME], messages: [{ role: 'user', content: WEATHER_QUESTION }] },
      required: true,
      honoured: (a) => expect(toolCalls(a).map((c) => c.function.name)).toEqual(['get_time']),
    },
  ],
  tools: [
    {
      value: [CHAT_WEATHER],
      with: { messages: [{ role: 'user', content: WEATHER_QUESTION }] },
      required: true,
      honoured: (a) => {
        expect(a.body.choices[0].finish_reason).toBe('tool_calls');
        expect(toolCalls(a).map((c) => c.function.name)).toEqual(['get_weather']);
        expect(JSON.parse(toolCalls(a)[0]!.function.arguments)).toEqual({ city: expect.any(String) });
      },
    },
  ],
  top_logprobs: [
    {
      value: 3,
      with: { logprobs: true },
      required: true,
      honoured: (a) => {
        const content = a.body.choices[0].logprobs.content as Array<{ top_logprobs: unknown[] }>;
        expect(content.length).toBeGreaterThan(0);
        for (const t of content) expect(t.top_logprobs).toHaveLength(3);
      },
    },
  ],
  top_p: [{ value: 0.9, honoured: passedOn('sampling') }],
  user: [{ value: 'user-7f3a', honoured: passedOn('abuse tracking') }],
  verbosity: [{ value: 'low', honoured: passedOn('reasoning models') }],
  web_search_options: [{ value: {} }],
};

const RESPONSES: Record<string, Case[]> = {
  background: [{ value: false, honoured: (a) => expect(a.body.background).toBe(false) }, { value: true }],
  context_management: [{ value: [{ type: 'compaction', compact_threshold: 200_000 }] }],
  conversation: [{ value: 'conv_123' }],
  include: [{ value: ['message.output_text.logprobs'] }],
  input: [
    { value: HELLO, required: true, honoured: (a) => expect(outputText(a).toLowerCase()).toContain('community') },
    {
      value: [
        { role: 'developer', content: 'Answer briefly.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: HELLO }] },
      ],
      required: true,
      honoured: (a) => {
        expect(outputText(a)).toBe(outputText(responseBaseline));
        expect(a.body.usage.input_tokens).toBeGreaterThan(responseBaseline.body.usage.input_tokens);
      },
    },
  ],
  instructions: [
    {
      value: 'Answer in two sentences.',
      required: true,
      honoured: (a) => {
        expect(a.body.instructions).toBe('Answer in two sentences.');
        expect(a.body.usage.input_tokens).toBeGreaterThan(responseBaseline.body.usage.input_tokens);
      },
    },
  ],
  max_output_tokens: [
    {
      value: 5,
      required: true,
      honoured: (a) => {
        expect(a.body).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, max_output_tokens: 5 });
        expect(a.body.usage.output_tokens).toBeLessThanOrEqual(5);
      },
    },
  ],
  metadata: [
    {
      value: { topic: 'gardens' },
      required: true,
      honoured: async (a) => {
        expect(a.body.metadata).toEqual({ topic: 'gardens' });
        expect((await api.call('GET', `/v1/responses/${a.body.id}`, { token: tester.key })).body.metadata).toEqual({ topic: 'gardens' });
      },
    },
  ],
  model: [{ value: 'chat-2', required: true, honoured: (a) => expect(a.body.model).toBe('chat-2') }],
  parallel_tool_calls: [
    {
      value: false,
      with: { tools: [RESPONSE_WEATHER, RESPONSE_TIME], tool_choice: 'required', input: 'What are the weather and the local time in Lisbon?' },
      required: true,
      honoured: (a) => {
        expect(a.body.parallel_tool_calls).toBe(false);
        expect(functionCalls(a)).toHaveLength(1);
      },
    },
  ],
  previous_response_id: [
    {
      value: () => responseBaseline.body.id,
      required: true,
      honoured: (a) => {
        expect(a.body.previous_response_id).toBe(responseBaseline.body.id);
        // The earlier exchange went before the new input.
        const earlier = responseBaseline.body.usage;
        expect(a.body.usage.input_tokens).toBeGreaterThanOrEqual(earlier.input_tokens + earlier.output_tokens);
      },
    },
  ],
  prompt: [{ value: { id: 'pmpt_123' } }],
  prompt_cache_key: [{ value: 'gardens-faq', honoured: passedOn('prompt caching') }],
  prompt_cache_retention: [{ value: 'in-memory', honoured: passedOn('prompt caching') }],
  reasoning: [{ value: { effort: 'low' } }],
  safety_identifier: [{ value: 'user-7f3a', honoured: (a) => expect(a.body.safety_identifier).toBe('user-7f3a') }],
  service_tier: [{ value: 'auto', honoured: (a) => expect(a.body.service_tier).toBe('default') }, { value: 'flex' }],
  store: [
    { value: false, required: true, honoured: async (a) => expect((await api.call('GET', `/v1/responses/${a.body.id}`, { token: tester.key })).status).toBe(404) },
    { value: true, required: true, honoured: async (a) => expect((await api.call('GET', `/v1/responses/${a.body.id}`, { token: tester.key })).body).toEqual(a.body) },
  ],
  stream: [
    {
      value: true,
      required: true,
      honoured: (a) => {
        expect(a.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const events = sseJson(a);
        expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
        expect(events[0].type).toBe('response.created');
        expect(events.at(-1)).toMatchObject({ type: 'response.completed', response: { status: 'completed' } });
        expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('')).toBe(outputText(responseBaseline));
      },
    },
  ],
  stream_options: [
    {
      value: { include_obfuscation: false },
      with: { stream: true },
      honoured: (a) => {
        const deltas = sseJson(a).filter((e) => e.type === 'response.output_text.delta');
        expect(deltas.length).toBeGreaterThan(0);
        for (const delta of deltas) expect(delta).not.toHaveProperty('obfuscation');
      },
    },
    { value: { include_obfuscation: true }, with: { stream: true } },
  ],
  temperature: [{ value: 0.2, honoured: (a) => expect(a.body.temperature).toBe(0.2) }],
  text: [
    {
      value: { format: { type: 'json_schema', name: 'garden', schema: GARDEN_SCHEMA, strict: true } },
      required: true,
      honoured: (a) => expect(validGarden(JSON.parse(outputText(a))), JSON.stringify(validGarden.errors)).toBe(true),
    },
    {
      value: { format: { type: 'json_object' } },
      with: { input: `${HELLO} Answer in JSON.` },
      required: true,
      honoured: (a) => expect(JSON.parse(outputText(a))).toBeTypeOf('object'),
    },
    { value: { format: { type: 'text' } }, honoured: (a) => expect(outputText(a)).toBe(outputText(responseBaseline)) },
    { value: { verbosity: 'low' } },
  ],
  tool_choice: [
    { value: 'required', with: { tools: [RESPONSE_WEATHER] }, required: true, honoured: (a) => expect(functionCalls(a).map((c) => c.name)).toEqual(['get_weather']) },
    {
      value: 'none',
      with: { tools: [RESPONSE_WEATHER], input: WEATHER_QUESTION },
      required: true,
      honoured: (a) => {
        expect(functionCalls(a)).toEqual([]);
        expect(outputText(a).toLowerCase()).toContain('lisbon');
      },
    },
    {
      value: { type: 'function', name: 'get_time' },
      with: { tools: [RESPONSE_WEATHER, RESPONSE_TIME], input: WEATHER_QUESTION },
      required: true,
      honoured: (a) => expect(functionCalls(a).map((c) => c.name)).toEqual(['get_time']),
    },
  ],
  tools: [
    {
      value: [RESPONSE_WEATHER],
      with: { input: WEATHER_QUESTION },
      required: true,
      honoured: (a) => {
        expect(functionCalls(a)).toEqual([expect.objectContaining({ name: 'get_weather', call_id: expect.any(String), status: 'completed' })]);
        expect(JSON.parse(functionCalls(a)[0].arguments)).toEqual({ city: expect.any(String) });
      },
    },
  ],
  top_p: [{ value: 1, honoured: (a) => expect(a.body.top_p).toBe(1) }, { value: 0.9, honoured: (a) => expect(a.body.top_p).toBe(0.9) }],
  truncation: [{ value: 'auto', honoured: (a) => expect(a.body.truncation).toBe('auto') }, { value: 'disabled' }],
  user: [{ value: 'user-7f3a', honoured: (a) => expect(a.body.user).toBe('user-7f3a') }],
};

// ---------- the walk ----------

let service: RunningService;

beforeAll(async () => {
  service = await startForClients();
  const customers = customersOf(service);
  api = customers.api;
  tester = await customers.newCustomer('test');
  chatBaseline = await chat({});
  expect(chatBaseline.status).toBe(200);
  responseBaseline = await respond({});
  expect(responseBaseline.status).toBe(200);
});
afterAll(async () => {
  await service?.stop();
});

async function send(path: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await api.call('POST', path, { token: tester.key, body });
  const streamed = /^text\/event-stream/.test(res.headers.get('content-type') ?? '');
  return { ...res, events: streamed ? await readSse(new globalThis.Response(res.body as string)) : [] };
}
function chat(fields: Record<string, unknown>) {
  return send('/v1/chat/completions', { model: 'chat-2', messages: [{ role: 'user', content: HELLO }], ...fields });
}
function respond(fields: Record<string, unknown>) {
  return send('/v1/responses', { model: 'chat-2', input: HELLO, ...fields });
}

async function walk(table: Record<string, Case[]>, field: string, request: (fields: Record<string, unknown>) => Promise<Answer>) {
  const cases = table[field];
  if (!cases) throw new Error(`'${field}' is a new field of the SDK: classify it (honoured, and how that shows, or refused)`);
  for (const c of cases) {
    const value = typeof c.value === 'function' ? (c.value as () => unknown)() : c.value;
    const answer = await request({ ...c.with, [field]: value });
    const what = `${field}: ${JSON.stringify(value)} → ${answer.status} ${answer.events.length ? '(stream)' : JSON.stringify(answer.body)}`;
    if (answer.status === 200) {
      if (!c.honoured) throw new Error(`${what}: answered 2xx but classified as refused here, so it was ignored (or classify how it is honoured)`);
      await c.honoured(answer);
    } else {
      expect(c.required, `${what}: the issue asks for it to be honoured`).toBeUndefined();
      expect(answer.status, what).toBe(400);
      expect(answer.body.error.code, what).toBe('unsupported_parameter');
      // The field itself, or the part of it that is refused (`stream_options.include_obfuscation`).
      expect(answer.body.error.param, what).toMatch(new RegExp(`^${field}($|[.[])`));
    }
  }
}

describe(`every field of openai ${SDK_VERSION}'s Chat Completions request is honoured or refused by name`, () => {
  it('reads the fields from the SDK, and classifies no field it does not have', () => {
    expect(CHAT_FIELDS).toEqual(expect.arrayContaining(['messages', 'model', 'tools', 'response_format', 'n']));
    expect(Object.keys(CHAT).filter((f) => !CHAT_FIELDS.includes(f))).toEqual([]);
  });
  it.each(CHAT_FIELDS)('%s', (field) => walk(CHAT, field, chat));
});

describe(`every field of openai ${SDK_VERSION}'s Responses request is honoured or refused by name`, () => {
  it('reads the fields from the SDK, and classifies no field it does not have', () => {
    expect(RESPONSE_FIELDS).toEqual(expect.arrayContaining(['input', 'model', 'tools', 'text', 'previous_response_id']));
    expect(Object.keys(RESPONSES).filter((f) => !RESPONSE_FIELDS.includes(f))).toEqual([]);
  });
  it.each(RESPONSE_FIELDS)('%s', (field) => walk(RESPONSES, field, respond));
});
