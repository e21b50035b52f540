import { type ChatCompletion, ManualClock, sortableIds, type StreamFrame, toApiError } from '@oc/contracts';
import { CommandHandler, openSqliteStores } from '@oc/eventstore';
import { ProjectionRunner, readYourWrites, SqliteReadModelStore } from '@oc/readmodel';
import { DeploymentPool } from '@oc/routing';
import { createLogger } from '@oc/telemetry';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RoutedChatProvider, type ChatTarget } from '../src/adapters/routed-provider';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { ChatService } from '../src/application/chat';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { chatProjections } from '../src/projections/chat-projections';
import { chatCollections } from '../src/projections/documents';

/** The simulator as chat-2's live provider, recording what it is asked. */
class Recorded implements ChatProvider {
  requests: GenerationRequest[] = [];
  private readonly simulator = new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 });
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    this.requests.push(request);
    return this.simulator.generate(request, signal);
  }
}

const WEATHER = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather in a city today',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
    strict: true,
  },
};
const PRICE = 80; // micro-USD per token at 0.08 USD per 1,000

describe('the agent contract on the chat service', () => {
  let stores: ReturnType<typeof openSqliteStores>;
  let projections: ProjectionRunner;
  let chat: ChatService;
  let provider: ChatProvider;
  let recorded: Recorded;
  let funds: Array<[string, string, number?]>;
  let frames: StreamFrame[];

  const start = async (live: ChatProvider) => {
    const readModels = new SqliteReadModelStore({ filename: ':memory:' });
    projections = new ProjectionRunner(stores.store, readModels, chatProjections, { collections: chatCollections });
    await projections.start();
    const commands = new CommandHandler(stores.store);
    chat = new ChatService({
      eventStore: stores.store,
      commands,
      readModels: readYourWrites(readModels, projections, commands),
      provider: live,
      simulator: new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }),
      tokenizer: gptTokenizer,
      deployments: () => [],
      funds: {
        reserve: async (_org, id, amount) => void funds.push(['reserve', id, amount]),
        capture: async (_org, id, amount) => void funds.push(['capture', id, amount]),
        release: async (_org, id) => void funds.push(['release', id]),
        holders: async () => [],
        releaseHeld: async () => ({ released: 0, more: false }),
      },
      frames: { publish: async (_subject, frame) => void frames.push(frame as StreamFrame) },
      clock: new ManualClock(Date.UTC(2026, 10, 22)),
      ids: sortableIds,
      pricing: { microsPer1kTokens: 80_000, defaultMaxTokens: 256, contextTokens: 128_000 },
      lifecycle: { replica: 'chat-a', deadlineMs: 60_000 },
      logger: createLogger({ service: 'chat-test', level: 'silent' }),
    });
  };

  const ask = async (body: Record<string, unknown>) =>
    (await chat.createChatCompletion({ model: 'chat-2', stream: false, temperature: undefined, org_id: 'org_1', mode: 'live', ...body } as never)) as ChatCompletion;

  /** The frames of a stream once it has ended. */
  const streamed = async (body: Record<string, unknown>) => {
    await chat.createChatCompletion({ model: 'chat-2', stream: true, temperature: undefined, org_id: 'org_1', mode: 'live', stream_to: 'chat.streams.t', ...body } as never);
    await vi.waitFor(() => expect(frames.some((f) => f.kind !== 'data')).toBe(true));
    expect(frames.at(-1)!.kind).toBe('end');
    return frames.filter((f) => f.kind === 'data').map((f) => (f as { data: any }).data);
  };

  beforeEach(async () => {
    stores = openSqliteStores({ filename: ':memory:' });
    recorded = new Recorded();
    provider = recorded;
    funds = [];
    frames = [];
    await start(provider);
  });
  afterEach(async () => {
    await chat.close();
    await projections.stop();
    await stores.close();
  });

  it('given tools, when asked, then it answers with a tool call whose arguments fit the schema; the tool result continues the session to a text answer', async () => {
    const first = await ask({ messages: [{ role: 'user', content: 'What is the weather in Lisbon?' }], tools: [WEATHER] });
    const [choice] = first.choices;
    expect(choice).toMatchObject({ finish_reason: 'tool_calls', logprobs: null, message: { role: 'assistant', content: null, refusal: null } });
    const call = choice!.message.tool_calls![0]!;
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } });
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'city', unit: 'celsius' });

    const second = await ask({
      session_id: first.session_id,
      messages: [{ role: 'tool', tool_call_id: call.id, content: 'Sunny and 24 degrees' }],
      tools: [WEATHER],
      metadata: { trip: 'lisbon' },
    });
    expect(second.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: expect.stringMatching(/sunny|degrees/i) } });
    expect(second.choices[0]!.message.tool_calls).toBeUndefined();
    // The provider was sent the stored call before its result.
    expect(recorded.requests.at(-1)!.messages.slice(-2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: 'Sunny and 24 degrees' },
    ]);
    const session = await chat.getSession({ org_id: 'org_1', session_id: first.session_id });
    expect(session.messages.map((m) => [m.role, m.tool_calls?.[0]?.id ?? m.tool_call_id ?? null])).toEqual([
      ['user', null],
      ['assistant', call.id],
      ['tool', call.id],
      ['assistant', null],
    ]);
    // Each answer shows the metadata its request sent.
    expect(session.messages.map((m) => m.metadata ?? null)).toEqual([null, null, null, { trip: 'lisbon' }]);
  });

  it('given tool_choice none, then text; given a named tool, then that one, even after a tool result', async () => {
    const other = { type: 'function' as const, function: { name: 'lookup_city', parameters: { type: 'object', properties: {} } } };
    const none = await ask({ messages: [{ role: 'user', content: 'Weather in Lisbon?' }], tools: [WEATHER, other], tool_choice: 'none' });
    expect(none.choices[0]!.finish_reason).toBe('stop');
    const named = await ask({
      messages: [
        { role: 'user', content: 'Weather in Lisbon?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'Sunny' },
      ],
      tools: [WEATHER, other],
      tool_choice: { type: 'function', function: { name: 'lookup_city' } },
    });
    expect(named.choices[0]!.message.tool_calls![0]!.function).toEqual({ name: 'lookup_city', arguments: '{}' });
  });

  it('given n: 2, then two different choices, all of them reserved for up front and exactly what was generated charged', async () => {
    const answer = await ask({ messages: [{ role: 'user', content: 'Name a vegetable for shade.' }], n: 2, max_completion_tokens: 40 });
    expect(answer.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(answer.choices[0]!.message.content).not.toBe(answer.choices[1]!.message.content);
    const generated = answer.choices.reduce((sum, c) => sum + gptTokenizer.count(c.message.content!), 0);
    expect(answer.usage.completion_tokens).toBe(generated);
    expect(funds).toEqual([
      ['reserve', answer.id, (answer.usage.prompt_tokens + 2 * 40) * PRICE],
      ['capture', answer.id, answer.usage.total_tokens * PRICE],
    ]);
    expect(recorded.requests.at(-1)).toMatchObject({ n: 2, maxTokens: 40 });
  });

  it('given max_completion_tokens, then it caps the answer and the reservation as max_tokens does', async () => {
    const answer = await ask({ messages: [{ role: 'user', content: 'Explain composting in detail.' }], max_completion_tokens: 5 });
    expect(answer.choices[0]!.finish_reason).toBe('length');
    expect(answer.usage.completion_tokens).toBeLessThanOrEqual(5);
    expect(funds[0]).toEqual(['reserve', answer.id, (answer.usage.prompt_tokens + 5) * PRICE]);
  });

  it('given a json_schema response format, then JSON valid against it; json_object, then a JSON object; logprobs in OpenAI shape', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string' }, plots: { type: 'integer', minimum: 1 } }, required: ['name', 'plots'], additionalProperties: false };
    const structured = await ask({
      messages: [{ role: 'user', content: 'Describe a garden.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'garden', schema, strict: true } },
      logprobs: true,
      top_logprobs: 3,
    });
    expect(JSON.parse(structured.choices[0]!.message.content!)).toEqual({ name: 'name', plots: 1 });
    const { content } = structured.choices[0]!.logprobs!;
    expect(content!.map((t) => t.token).join('')).toBe(structured.choices[0]!.message.content);
    for (const token of content!) {
      expect(token.logprob).toBeLessThan(0);
      expect(token.bytes).toEqual([...Buffer.from(token.token)]);
      expect(token.top_logprobs).toHaveLength(3);
      const values = token.top_logprobs.map((t) => t.logprob);
      expect(values).toEqual([...values].sort((a, b) => b - a));
    }
    const object = await ask({ messages: [{ role: 'user', content: 'Describe a garden.' }], response_format: { type: 'json_object' } });
    expect(JSON.parse(object.choices[0]!.message.content!)).toEqual({ answer: expect.any(String) });
  });

  it('given a seed, then the same request gets the same reply, and another seed another one', async () => {
    const reply = async (seed: number) => (await ask({ messages: [{ role: 'user', content: 'Plan a garden.' }], seed })).choices[0]!.message.content;
    expect(await reply(1)).toBe(await reply(1));
    expect(await reply(1)).not.toBe(await reply(2));
  });

  it('counts images and tool definitions in the prompt, so the reservation covers them', async () => {
    const plain = await ask({ messages: [{ role: 'user', content: 'What is this?' }] });
    const withImage = await ask({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'low' } }] }],
    });
    expect(withImage.usage.prompt_tokens - plain.usage.prompt_tokens).toBe(85);
    const withTools = await ask({ messages: [{ role: 'user', content: 'What is this?' }], tools: [WEATHER], tool_choice: 'none' });
    expect(withTools.usage.prompt_tokens - plain.usage.prompt_tokens).toBe(gptTokenizer.count(JSON.stringify([WEATHER])));
  });

  it('streams a tool call as OpenAI does: id, type and name first, then argument fragments, then finish_reason tool_calls', async () => {
    const chunks = await streamed({ messages: [{ role: 'user', content: 'Weather in Lisbon?' }], tools: [WEATHER], stream_options: { include_usage: true } });
    const deltas = chunks.flatMap((c) => c.choices.flatMap((x: any) => x.delta.tool_calls ?? []));
    expect(deltas[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(deltas.slice(1).every((d: any) => d.id === undefined && d.function.name === undefined)).toBe(true);
    expect(JSON.parse(deltas.map((d: any) => d.function.arguments).join(''))).toEqual({ city: 'city', unit: 'celsius' });
    expect(chunks.flatMap((c) => c.choices.map((x: any) => x.finish_reason)).filter(Boolean)).toEqual(['tool_calls']);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
  });

  it('streams n choices, each opened with its role, with logprobs on every text chunk', async () => {
    const chunks = await streamed({ messages: [{ role: 'user', content: 'Hello' }], n: 2, logprobs: true, top_logprobs: 1 });
    expect(chunks.slice(0, 2).map((c) => c.choices[0])).toEqual([
      { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
      { index: 1, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
    ]);
    const texts = chunks.flatMap((c) => c.choices).filter((x: any) => x.delta.content);
    expect(new Set(texts.map((x: any) => x.index))).toEqual(new Set([0, 1]));
    for (const x of texts) expect(x.logprobs.content).toEqual([expect.objectContaining({ token: x.delta.content, top_logprobs: [expect.any(Object)] })]);
  });

  it('given deployments without tools, then a request with tools (or a tool turn in its history) is 400 unsupported_parameter and nothing is reserved', async () => {
    await chat.close();
    const target = { provider: recorded, features: new Set(['temperature', 'stop']), costMicrosPer1M: { input: 0, output: 0 } } as ChatTarget;
    const pool = new DeploymentPool([{ id: 'plain', provider: 'anthropic', model: 'm', weight: 1, target }], { now: () => 0, random: () => 0 });
    await start(new RoutedChatProvider({ model: 'chat-2', pool, now: () => 0, onFailure: () => {} }));
    const refusal = (body: Record<string, unknown>) => ask(body).then(() => undefined, (error: unknown) => toApiError(error).toBody().error);
    expect(await refusal({ messages: [{ role: 'user', content: 'Hi' }], tools: [WEATHER] })).toMatchObject({ code: 'unsupported_parameter', param: 'tools' });
    expect(
      await refusal({
        messages: [
          { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c', content: 'r' },
        ],
      }),
    ).toMatchObject({ code: 'unsupported_parameter', param: 'messages[0].tool_calls' });
    expect(await refusal({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] })).toMatchObject({
      code: 'unsupported_parameter',
      param: 'messages[0].content[0]',
    });
    expect(funds).toEqual([]);
  });
});
