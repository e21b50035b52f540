import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor } from './client';
import { conformingSdkFetch } from './conformance';
import { embedded, type RunningService } from './harness';

/** 0.08 USD per 1,000 tokens: 80 micro-USD a token. */
const MICROS_PER_TOKEN = 80;

/**
 * OpenAI's Responses API end to end through the official SDK (`client.responses`), as a user of the Vercel AI SDK
 * or of OpenAI's own examples runs it: whole and streamed, continued by previous_response_id, retrieved, listed and
 * deleted, kept across a restart, another organization's answered 404, and billed exactly like chat.
 */
describe('the Responses API through the openai SDK', () => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    service = await embedded({ CHAT_SIMULATOR_WORD_DELAY_MS: '0' });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
  });

  const customer = () => api.newCustomer({ credit: 10, scopes: ['chat:read', 'chat:write'] });
  const sdk = (key: string) => new OpenAI({ apiKey: key, baseURL: `${service.url}/v1`, maxRetries: 0, fetch: conformingSdkFetch(service.url) });
  const availableMicros = async (key: string) => {
    const res = await api.call('GET', '/v1/account/balance', { token: key });
    return { available: Math.round(res.body.available * 1e6), reserved: Math.round(res.body.reserved * 1e6) };
  };

  it('creates a response, charged exactly its tokens at the chat price', async () => {
    const { key } = await customer();
    const before = await availableMicros(key);
    const response = await sdk(key).responses.create({ model: 'chat-2', input: 'How do community gardens change a neighbourhood?', instructions: 'Be concrete.' });
    expect(response).toMatchObject({
      id: expect.stringMatching(/^resp_/),
      object: 'response',
      status: 'completed',
      model: 'chat-2',
      instructions: 'Be concrete.',
      error: null,
      incomplete_details: null,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', annotations: [] }] }],
    });
    // The SDK's own convenience, from the output.
    expect(response.output_text).toContain('community');
    const usage = response.usage!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    expect(await availableMicros(key)).toEqual({ available: before.available - usage.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
  });

  it('streams the Responses events and ends with the completed response, the same one retrieve gives', async () => {
    const { key } = await customer();
    const before = await availableMicros(key);
    const stream = await sdk(key).responses.create({ model: 'chat-2', input: 'Tell me about tomatoes.', stream: true });
    const events = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(types.filter((t) => t === 'response.output_text.delta').length).toBeGreaterThan(3);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output).toEqual([expect.objectContaining({ content: [{ type: 'output_text', text: deltas, annotations: [] }] })]);
    const retrieved = await sdk(key).responses.retrieve(completed.response.id);
    expect({ ...retrieved, output_text: undefined }).toEqual({ ...completed.response, output_text: undefined });
    expect(await availableMicros(key)).toEqual({ available: before.available - completed.response.usage!.total_tokens * MICROS_PER_TOKEN, reserved: 0 });

    // The SDK's stream helper assembles the same response from the events (without `output_text`: that only its
    // non-streamed calls add, as against OpenAI).
    const final = await sdk(key).responses.stream({ model: 'chat-2', input: 'Tell me about tomatoes.' }).finalResponse();
    expect(final.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: deltas }] });
  });

  it('continues a conversation with previous_response_id: the second answer is given the first turn', async () => {
    const client = sdk((await customer()).key);
    const first = await client.responses.create({ model: 'chat-2', input: 'My garden has tomatoes and basil.' });
    const second = await client.responses.create({ model: 'chat-2', input: 'What grows in it?', previous_response_id: first.id });
    const alone = await client.responses.create({ model: 'chat-2', input: 'What grows in it?' });
    expect(second.previous_response_id).toBe(first.id);
    // The second was sent the first's input and answer before its own. A prompt counts 3 tokens, and each message its
    // own plus 4: the first turn adds its prompt's messages (its input_tokens less 3) and its answer (output_tokens + 4).
    expect(second.usage!.input_tokens - alone.usage!.input_tokens).toBe(first.usage!.input_tokens - 3 + first.usage!.output_tokens + 4);
  });

  it('calls a function tool, takes its output back with previous_response_id, and answers in text; streamed too', async () => {
    const client = sdk((await customer()).key);
    const tools = [
      {
        type: 'function' as const,
        name: 'get_weather',
        description: 'Current weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
        strict: true,
      },
    ];
    const asked = await client.responses.create({ model: 'chat-2', input: 'What is the weather in Oslo?', tools, tool_choice: 'required' });
    expect(asked.output).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.any(String), name: 'get_weather', arguments: expect.any(String), status: 'completed' },
    ]);
    const call = asked.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(JSON.parse(call.arguments)).toEqual({ city: expect.any(String) });
    const answered = await client.responses.create({
      model: 'chat-2',
      previous_response_id: asked.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c":3}' }],
      tools,
    });
    expect(answered.output).toEqual([expect.objectContaining({ type: 'message', status: 'completed' })]);
    expect(answered.output_text).not.toBe('');

    const stream = await client.responses.create({ model: 'chat-2', input: 'And in Bergen?', tools, tool_choice: 'required', stream: true });
    const events = [];
    for await (const event of stream) events.push(event);
    const deltas = events.flatMap((e) => (e.type === 'response.function_call_arguments.delta' ? [e.delta] : [])).join('');
    const done = events.find((e) => e.type === 'response.function_call_arguments.done') as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
    expect(done).toMatchObject({ name: 'get_weather', arguments: deltas });
    expect(events.at(-1)!.type).toBe('response.completed');
  });

  it('answers JSON valid against a text.format json_schema', async () => {
    const client = sdk((await customer()).key);
    const schema = { type: 'object', properties: { crop: { type: 'string' }, weeks: { type: 'integer' } }, required: ['crop', 'weeks'], additionalProperties: false };
    const response = await client.responses.create({
      model: 'chat-2',
      input: 'Suggest a crop and how many weeks it takes.',
      text: { format: { type: 'json_schema', name: 'suggestion', schema, strict: true } },
    });
    expect(JSON.parse(response.output_text)).toEqual({ crop: expect.any(String), weeks: expect.any(Number) });
  });

  it('lists the input items, deletes the response, keeps it across a restart, and shows it to no other organization', async () => {
    const { key } = await customer();
    const client = sdk(key);
    const response = await client.responses.create({
      model: 'chat-2',
      input: [
        { role: 'developer', content: 'Answer briefly.' },
        { role: 'user', content: [{ type: 'input_text', text: 'When do I plant garlic?' }] },
      ],
    });
    const items = [];
    for await (const item of client.responses.inputItems.list(response.id, { limit: 1 })) items.push(item);
    expect(items).toEqual([
      { type: 'message', id: expect.any(String), role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'When do I plant garlic?' }] },
      { type: 'message', id: expect.any(String), role: 'developer', status: 'completed', content: [{ type: 'input_text', text: 'Answer briefly.' }] },
    ]);

    await service.restart();
    expect((await client.responses.retrieve(response.id)).output).toEqual(response.output);

    const other = sdk((await customer()).key);
    for (const call of [
      () => other.responses.retrieve(response.id),
      () => other.responses.delete(response.id),
      () => other.responses.inputItems.list(response.id),
      () => other.responses.create({ model: 'chat-2', input: 'Hi', previous_response_id: response.id }),
    ]) {
      await expect(call()).rejects.toMatchObject({ status: 404 });
    }

    const deleted = await api.call('DELETE', `/v1/responses/${response.id}`, { token: key });
    expect(deleted.body).toEqual({ id: response.id, object: 'response.deleted', deleted: true });
    await expect(client.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses what it cannot honour with unsupported_parameter naming it, and charges nothing', async () => {
    const { key } = await customer();
    const before = await availableMicros(key);
    for (const [body, param] of [
      [{ background: true }, 'background'],
      [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ reasoning: { effort: 'high' } }, 'reasoning'],
    ] as const) {
      const res = await api.call('POST', '/v1/responses', { token: key, body: { model: 'chat-2', input: 'Hi', ...body } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param });
    }
    expect(await availableMicros(key)).toEqual(before);
  });

  it('needs chat:write to create and chat:read to read', async () => {
    const reader = await api.newCustomer({ credit: 1, scopes: ['chat:read'] });
    const res = await api.call('POST', '/v1/responses', { token: reader.key, body: { model: 'chat-2', input: 'Hi' } });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('chat:write');
  });
});
