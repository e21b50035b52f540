import { createOpenAI } from '@ai-sdk/openai';
import { tool as lcTool } from '@langchain/core/tools';
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateObject, generateText, isStepCount, Output, tool as aiTool } from 'ai';
import { countTokens } from 'gpt-tokenizer';
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type Customer, customersOf, startForClients } from './agents-support';
import { conformingSdkFetch } from './conformance';
import type { RunningService } from './harness';
import { MICROS_PER_TOKEN } from './money';

/**
 * Issue 27: the clients our users run, each unchanged but for its base URL and key, against the service as
 * `pnpm start` runs it, offline (no provider configured: live keys are served by the simulator at the public
 * price, 0.08 USD per 1,000 tokens, 80 micro-USD a token). Every scenario is paid with a live key, and each checks
 * that the organization's balance dropped by exactly the usage the client was told times the price.
 */

let service: RunningService;
let customers: ReturnType<typeof customersOf>;
let live: Customer;
let baseURL: string;

beforeAll(async () => {
  service = await startForClients();
  customers = customersOf(service);
  live = await customers.newCustomer('live');
  baseURL = `${service.url}/v1`;
});
afterAll(async () => {
  await service?.stop();
});

const REQUEST_ID = /^req_[0-9a-f]{32}$/;
const WEATHER_QUESTION = 'What is the weather in Lisbon today?';
/** What every client's weather tool answers: the final texts must show they read it. */
const weatherReport = (city: string) => `Sunny and 24 degrees in ${city} with a light breeze`;
/** The simulator writes its reply around the words of the last message: the tool's result, once sent back. */
const mentionsTheReport = (text: string) => expect(text.toLowerCase()).toMatch(/sunny|breeze|degrees/);

const Garden = z.object({ name: z.string(), plots: z.number().int(), crops: z.array(z.string()) });
const GARDEN_QUESTION = 'Describe a community garden: its name, how many plots it has, and the crops grown there.';

/** Spent exactly `tokens` at the public price, in one completion per call the client made. */
async function expectCharged(meter: Awaited<ReturnType<typeof customers.meter>>, tokens: number[]) {
  const charged = await meter.charged();
  expect(charged.releases).toBe(0);
  expect(charged.captures.sort()).toEqual(tokens.map((t) => t * MICROS_PER_TOKEN).sort());
  expect(charged.micros).toBe(tokens.reduce((a, b) => a + b, 0) * MICROS_PER_TOKEN);
}

describe('the official openai SDK', () => {
  const sdk = () => new OpenAI({ apiKey: live.key, baseURL, maxRetries: 0, fetch: conformingSdkFetch(service.url) });
  const weatherTool: ChatCompletionTool = {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
      strict: true,
    },
  };

  it('runs a tools round trip: the model calls the tool, the tool result goes back, the answer uses it', async () => {
    const client = sdk();
    const meter = await customers.meter(live);
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: WEATHER_QUESTION }];
    const first = await client.chat.completions.create({ model: 'chat-2', messages, tools: [weatherTool] });
    expect(first._request_id).toMatch(REQUEST_ID);
    const [choice] = first.choices;
    expect(choice!.finish_reason).toBe('tool_calls');
    expect(choice!.message.content).toBeNull();
    expect(choice!.message.tool_calls).toHaveLength(1);
    const call = choice!.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error(`a ${call.type} tool call`);
    expect(call.function.name).toBe('get_weather');
    const args = JSON.parse(call.function.arguments) as { city: string };
    expect(args).toEqual({ city: expect.any(String) });

    // The assistant turn exactly as the SDK returned it, then the tool's result.
    messages.push(choice!.message, { role: 'tool', tool_call_id: call.id, content: weatherReport(args.city) });
    const second = await client.chat.completions.create({ model: 'chat-2', messages, tools: [weatherTool] });
    expect(second.choices[0]!.finish_reason).toBe('stop');
    expect(second.choices[0]!.message.tool_calls ?? []).toEqual([]);
    mentionsTheReport(second.choices[0]!.message.content!);
    await expectCharged(meter, [first.usage!.total_tokens, second.usage!.total_tokens]);
  });

  it('parses a structured answer with chat.completions.parse and zodResponseFormat (zod 4)', async () => {
    const meter = await customers.meter(live);
    const completion = await sdk().chat.completions.parse({
      model: 'chat-2',
      messages: [{ role: 'user', content: GARDEN_QUESTION }],
      response_format: zodResponseFormat(Garden, 'garden'),
    });
    const parsed = completion.choices[0]!.message.parsed;
    expect(parsed).not.toBeNull();
    expect(Garden.parse(parsed)).toEqual(parsed);
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual(parsed);
    await expectCharged(meter, [completion.usage!.total_tokens]);
  });

  it('charges every choice of n: 2', async () => {
    const meter = await customers.meter(live);
    const completion = await sdk().chat.completions.create({ model: 'chat-2', n: 2, messages: [{ role: 'user', content: 'How do community gardens change a neighbourhood?' }] });
    expect(completion.choices.map((c) => c.index)).toEqual([0, 1]);
    const [a, b] = completion.choices.map((c) => c.message.content!);
    expect(a).not.toBe(b);
    // Both choices' tokens are the completion's, counted as the README says (gpt-tokenizer).
    expect(completion.usage!.completion_tokens).toBe(countTokens(a!) + countTokens(b!));
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    await expectCharged(meter, [completion.usage!.total_tokens]);
  });

  it('streams a tool call as argument deltas, with the usage last', async () => {
    const meter = await customers.meter(live);
    const stream = await sdk().chat.completions.create({
      model: 'chat-2',
      messages: [{ role: 'user', content: WEATHER_QUESTION }],
      tools: [weatherTool],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const deltas = chunks.flatMap((c) => c.choices.flatMap((choice) => choice.delta.tool_calls ?? []));
    // The first fragment names the call; the others carry its arguments, piece by piece, and name nothing.
    expect(deltas[0]).toMatchObject({ index: 0, id: expect.any(String), type: 'function', function: { name: 'get_weather' } });
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas.every((d) => d.index === 0)).toBe(true);
    expect(deltas.slice(1).map((d) => [d.id, d.function?.name])).toEqual(deltas.slice(1).map(() => [undefined, undefined]));
    expect(deltas.slice(1).every((d) => (d.function?.arguments ?? '') !== '')).toBe(true);
    const args = deltas.map((d) => d.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual({ city: expect.any(String) });
    expect(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(['tool_calls']);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    await expectCharged(meter, [last.usage!.total_tokens]);
  });

  it('answers with the Responses API, and a second response with previous_response_id sees the first', async () => {
    const client = sdk();
    const meter = await customers.meter(live);
    const firstInput = 'My allotment grows tomatoes, beans and courgettes along the south fence.';
    const first = await client.responses.create({ model: 'chat-2', input: firstInput });
    expect(first._request_id).toMatch(REQUEST_ID);
    expect(first).toMatchObject({ object: 'response', status: 'completed', model: 'chat-2', previous_response_id: null });
    expect(first.id).toMatch(/^resp_/);
    expect(first.output_text.toLowerCase()).toContain('tomatoes');

    const question = 'Which of those needs the most water?';
    const alone = await client.responses.create({ model: 'chat-2', input: question, store: false });
    const second = await client.responses.create({ model: 'chat-2', input: question, previous_response_id: first.id });
    expect(second).toMatchObject({ status: 'completed', previous_response_id: first.id });
    // The first exchange went upstream before the question: its input and its answer count in the prompt.
    expect(second.usage!.input_tokens - alone.usage!.input_tokens).toBeGreaterThanOrEqual(countTokens(firstInput) + first.usage!.output_tokens);
    const stored = await client.responses.retrieve(second.id);
    expect(stored.output_text).toBe(second.output_text);
    await expectCharged(meter, [first, alone, second].map((r) => r.usage!.total_tokens));
  });

  it('parses a structured answer with responses.parse and zodTextFormat', async () => {
    const meter = await customers.meter(live);
    const response = await sdk().responses.parse({ model: 'chat-2', input: GARDEN_QUESTION, text: { format: zodTextFormat(Garden, 'garden') } });
    expect(response.output_parsed).not.toBeNull();
    expect(Garden.parse(response.output_parsed)).toEqual(response.output_parsed);
    await expectCharged(meter, [response.usage!.total_tokens]);
  });

  it('streams a response as Responses events, numbered, ending with the completed response', async () => {
    const meter = await customers.meter(live);
    const stream = await sdk().responses.create({ model: 'chat-2', input: 'How do community gardens change a neighbourhood?', stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.slice(0, 2).map((e) => e.type)).toEqual(['response.created', 'response.in_progress']);
    const completed = events.at(-1)!;
    if (completed.type !== 'response.completed') throw new Error(`the stream ended with ${completed.type}`);
    const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    expect(text.toLowerCase()).toContain('community');
    expect(completed.response.output_text ?? text).toBe(text);
    const done = events.find((e) => e.type === 'response.output_text.done');
    expect(done).toMatchObject({ text });
    await expectCharged(meter, [completed.response.usage!.total_tokens]);
  });

  it('streams a function call of the Responses API as argument deltas', async () => {
    const meter = await customers.meter(live);
    const stream = await sdk().responses.create({
      model: 'chat-2',
      input: WEATHER_QUESTION,
      tools: [{ type: 'function', name: 'get_weather', description: 'The current weather in a city', parameters: weatherTool.function.parameters!, strict: true }],
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const deltas = events.flatMap((e) => (e.type === 'response.function_call_arguments.delta' ? [e.delta] : []));
    expect(deltas.length).toBeGreaterThan(0);
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    expect(done).toMatchObject({ name: 'get_weather', arguments: deltas.join('') });
    expect(JSON.parse(deltas.join(''))).toEqual({ city: expect.any(String) });
    const completed = events.at(-1)!;
    if (completed.type !== 'response.completed') throw new Error(`the stream ended with ${completed.type}`);
    expect(completed.response.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather', arguments: deltas.join('') })]);
    await expectCharged(meter, [completed.response.usage!.total_tokens]);
  });

  it('shows the x-request-id as requestID on an error, and charges nothing', async () => {
    const meter = await customers.meter(live);
    const error = await sdk()
      .chat.completions.create({ model: 'chat-2', messages: [{ role: 'user', content: 'Hello' }], tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'no_such_tool' } } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).requestID).toMatch(REQUEST_ID);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tool_choice');
    await expectCharged(meter, []);
  });
});

describe('the Vercel AI SDK', () => {
  const provider = () => createOpenAI({ baseURL, apiKey: live.key });
  const weather = () =>
    aiTool({
      description: 'The current weather in a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => weatherReport(city),
    });

  it("answers generateText on the default openai('chat-2'), the Responses API", async () => {
    const meter = await customers.meter(live);
    const result = await generateText({ model: provider()('chat-2'), prompt: 'How do community gardens change a neighbourhood?' });
    expect(result.text.toLowerCase()).toContain('community');
    expect(result.finishReason).toBe('stop');
    expect(result.response.id).toMatch(/^resp_/);
    await expectCharged(meter, [result.usage.inputTokens! + result.usage.outputTokens!]);
  });

  it.each([
    ['the Responses API', (p: ReturnType<typeof createOpenAI>) => p('chat-2')],
    ['Chat Completions', (p: ReturnType<typeof createOpenAI>) => p.chat('chat-2')],
  ])('runs a tool and uses its result in a second step, through %s', async (_, model) => {
    const meter = await customers.meter(live);
    const result = await generateText({ model: model(provider()), tools: { get_weather: weather() }, stopWhen: isStepCount(2), prompt: WEATHER_QUESTION });
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.toolCalls).toEqual([expect.objectContaining({ toolName: 'get_weather', input: { city: expect.any(String) } })]);
    expect(result.steps[0]!.toolResults).toEqual([expect.objectContaining({ toolName: 'get_weather', output: expect.stringContaining('Sunny') })]);
    expect(result.steps[1]!.toolCalls).toEqual([]);
    mentionsTheReport(result.text);
    await expectCharged(
      meter,
      result.steps.map((s) => s.usage.inputTokens! + s.usage.outputTokens!),
    );
  });

  it.each([
    ['the Responses API', (p: ReturnType<typeof createOpenAI>) => p('chat-2')],
    ['Chat Completions', (p: ReturnType<typeof createOpenAI>) => p.chat('chat-2')],
  ])('answers an object with a zod schema (Output.object, then generateObject), through %s', async (_, model) => {
    const meter = await customers.meter(live);
    const text = await generateText({ model: model(provider()), output: Output.object({ schema: Garden }), prompt: GARDEN_QUESTION });
    expect(Garden.parse(text.output)).toEqual(text.output);
    const object = await generateObject({ model: model(provider()), schema: Garden, prompt: GARDEN_QUESTION });
    expect(Garden.parse(object.object)).toEqual(object.object);
    await expectCharged(meter, [text.usage, object.usage].map((u) => u.inputTokens! + u.outputTokens!));
  });

  it("answers generateText on openai.chat('chat-2'), Chat Completions", async () => {
    const meter = await customers.meter(live);
    const result = await generateText({ model: provider().chat('chat-2'), prompt: 'How do community gardens change a neighbourhood?' });
    expect(result.text.toLowerCase()).toContain('community');
    expect(result.response.id).toMatch(/^chatcmpl_/);
    await expectCharged(meter, [result.usage.inputTokens! + result.usage.outputTokens!]);
  });
});

describe('LangChain JS', () => {
  const model = () => new ChatOpenAI({ model: 'chat-2', apiKey: live.key, configuration: { baseURL } });
  const weather = lcTool(async ({ city }: { city: string }) => weatherReport(city), {
    name: 'get_weather',
    description: 'The current weather in a city',
    schema: z.object({ city: z.string() }),
  });

  it('calls the bound tool (AIMessage.tool_calls), and answers with its result', async () => {
    const meter = await customers.meter(live);
    const bound = model().bindTools([weather]);
    const question = new HumanMessage(WEATHER_QUESTION);
    const call = await bound.invoke([question]);
    expect(call.tool_calls).toEqual([{ name: 'get_weather', args: { city: expect.any(String) }, id: expect.any(String), type: 'tool_call' }]);
    const result = (await weather.invoke(call.tool_calls![0]!)) as ToolMessage;
    expect(result).toBeInstanceOf(ToolMessage);
    const answer = await bound.invoke([question, call, result]);
    expect(answer.tool_calls).toEqual([]);
    mentionsTheReport(answer.text);
    await expectCharged(meter, [call.usage_metadata!.total_tokens, answer.usage_metadata!.total_tokens]);
  });

  it('answers withStructuredOutput (its default method) in one call, with a valid object', async () => {
    const meter = await customers.meter(live);
    const structured = model().withStructuredOutput(Garden, { includeRaw: true });
    const { raw, parsed } = await structured.invoke(GARDEN_QUESTION);
    expect(Garden.parse(parsed)).toEqual(parsed);
    if (!AIMessage.isInstance(raw)) throw new Error('the raw answer is no AIMessage');
    // One call: one completion captured, for the usage the call reported.
    await expectCharged(meter, [raw.usage_metadata!.total_tokens]);
  });
});

describe('the OpenAI Agents SDK', () => {
  const weather = agentTool({
    name: 'get_weather',
    description: 'The current weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => weatherReport(city),
  });
  const agent = () => new Agent({ name: 'Weather desk', instructions: 'Answer questions about the weather.', model: 'chat-2', tools: [weather] });

  beforeAll(() => {
    setTracingDisabled(true);
  });
  afterAll(() => {
    setOpenAIAPI('responses');
  });

  it.each([
    // First, before anything set the API: the SDK's own default.
    ['its default, the Responses API', undefined, /^resp_/],
    ['Chat Completions', 'chat_completions' as const, /^chatcmpl_/],
  ])('runs a two-step tool-using agent whose final output uses the tool result, through %s', async (_, api, ids) => {
    // @openai/agents 0.20 is typed against openai 7 (its own dependency); the openai 6.30.1 client of this package
    // serves it unchanged at run time, and the cast only bridges the two packages' declarations of the class.
    setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: live.key }) as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
    if (api) setOpenAIAPI(api);
    const meter = await customers.meter(live);
    const result = await run(agent(), WEATHER_QUESTION);
    expect(result.rawResponses).toHaveLength(2);
    // Each step went to the API asked for: its answers carry that API's ids.
    for (const step of result.rawResponses) expect(step.responseId).toMatch(ids);
    const calls = result.newItems.filter((item) => item.type === 'tool_call_item');
    expect(calls).toHaveLength(1);
    const outputs = result.newItems.filter((item) => item.type === 'tool_call_output_item');
    expect(outputs.map((o) => o.output)).toEqual([expect.stringContaining('Sunny')]);
    expect(typeof result.finalOutput).toBe('string');
    mentionsTheReport(result.finalOutput!);
    await expectCharged(
      meter,
      result.rawResponses.map((r) => r.usage.totalTokens),
    );
  });
});
