import { ManualClock, ResponseMessages, type ResponseStreamEvent, sortableIds, type StreamFrame } from '@oc/contracts';
import { CommandHandler, openSqliteStores } from '@oc/eventstore';
import { ProjectionRunner, readYourWrites, SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { ChatService } from '../src/application/chat';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { ResponsesService } from '../src/application/responses';
import { chatProjections } from '../src/projections/chat-projections';
import { chatCollections } from '../src/projections/documents';

/** An upstream that records what it was sent and answers "re: <last message>". */
class EchoProvider implements ChatProvider {
  requests: GenerationRequest[] = [];
  async *generate(request: GenerationRequest): AsyncIterable<GenerationEvent> {
    this.requests.push(request);
    const last = request.messages.at(-1)!.content;
    for (const word of `re: ${typeof last === 'string' ? last : ''}`.split(/(?= )/)) yield { type: 'content', text: word };
    yield { type: 'finish', finishReason: 'stop' };
  }
}

/**
 * The Responses API on the chat service, against its real stores and a scripted upstream: what it asks of the chat
 * completion, what it charges, what it stores, and the events a stream becomes.
 */
describe('responses on the chat service', () => {
  let stores: ReturnType<typeof openSqliteStores>;
  let readModels: SqliteReadModelStore;
  let projections: ProjectionRunner;
  let provider: EchoProvider;
  let chat: ChatService;
  let responses: ResponsesService;
  let funds: Array<[string, string, string, number?]>;
  let frames: StreamFrame[];
  /** Settles when a stream's last frame (its end or its error) is published. */
  let ended: Promise<void>;

  beforeEach(async () => {
    stores = openSqliteStores({ filename: ':memory:' });
    readModels = new SqliteReadModelStore({ filename: ':memory:' });
    projections = new ProjectionRunner(stores.store, readModels, chatProjections, { collections: chatCollections });
    await projections.start();
    provider = new EchoProvider();
    funds = [];
    frames = [];
    const clock = new ManualClock(Date.UTC(2026, 10, 22));
    const commands = new CommandHandler(stores.store);
    const models = readYourWrites(readModels, projections, commands);
    let end = () => {};
    ended = new Promise((resolve) => (end = resolve));
    const publisher = {
      publish: async (_subject: string, frame: unknown) => {
        frames.push(frame as StreamFrame);
        if ((frame as StreamFrame).kind !== 'data') end();
      },
    };
    chat = new ChatService({
      eventStore: stores.store,
      commands,
      readModels: models,
      provider,
      simulator: new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }),
      tokenizer: gptTokenizer,
      deployments: () => [],
      funds: {
        reserve: async (org, id, amount) => void funds.push(['reserve', org, id, amount]),
        capture: async (org, id, amount) => void funds.push(['capture', org, id, amount]),
        release: async (org, id) => void funds.push(['release', org, id]),
        holders: async () => [],
        releaseHeld: async () => ({ released: 0, more: false }),
      },
      frames: publisher,
      clock,
      ids: sortableIds,
      pricing: { microsPer1kTokens: 80_000, defaultMaxTokens: 256, contextTokens: 128_000 },
      lifecycle: { replica: 'chat-a', deadlineMs: 60_000 },
      logger: createLogger({ service: 'chat-test', level: 'silent' }),
    });
    responses = new ResponsesService({ chat, eventStore: stores.store, commands, readModels: models, frames: publisher, clock, ids: sortableIds });
  });
  afterEach(async () => {
    await chat.close();
    await projections.stop();
    await stores.close();
  });

  const create = (body: Record<string, unknown>, org = 'org_1') =>
    responses.create(ResponseMessages.create.parse({ model: 'chat-2', org_id: org, mode: 'live', ...body })) as Promise<any>;

  it('answers with a completed response, charged exactly like the chat completion it ran', async () => {
    const response = await create({ input: 'Hello there', instructions: 'Be brief.', max_output_tokens: 40, metadata: { ticket: 'T-1' } });
    expect(response).toMatchObject({
      id: expect.stringMatching(/^resp_/),
      object: 'response',
      status: 'completed',
      instructions: 'Be brief.',
      metadata: { ticket: 'T-1' },
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 're: Hello there', annotations: [] }] }],
    });
    expect(provider.requests[0]!.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ]);
    expect(provider.requests[0]!.maxTokens).toBe(40);
    const { input_tokens, output_tokens, total_tokens } = response.usage;
    expect(total_tokens).toBe(input_tokens + output_tokens);
    const [reserve, capture] = funds;
    expect(reserve).toEqual(['reserve', 'org_1', expect.stringMatching(/^chatcmpl_/), (input_tokens + 40) * 80]);
    expect(capture).toEqual(['capture', 'org_1', reserve![2], total_tokens * 80]);
    expect(funds).toHaveLength(2);
  });

  it('continues a chain: the next response sees the earlier turns but not their instructions, and joins their session', async () => {
    const first = await create({ input: 'My name is Ada.', instructions: 'Be brief.' });
    const second = await create({ input: 'What is my name?', previous_response_id: first.id });
    expect(second.previous_response_id).toBe(first.id);
    expect(provider.requests[1]!.messages).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 're: My name is Ada.' },
      { role: 'user', content: 'What is my name?' },
    ]);
    // A branch from the first response does not see the second.
    await create({ input: 'Something else.', previous_response_id: first.id });
    expect(provider.requests[2]!.messages.map((m) => m.content)).toEqual(['My name is Ada.', 're: My name is Ada.', 'Something else.']);
    const sessions = await chat.listSessions({ org_id: 'org_1', limit: 20 });
    expect(sessions.data).toHaveLength(1);
    expect((await chat.getSession({ org_id: 'org_1', session_id: sessions.data[0]!.id })).messages).toHaveLength(6);
  });

  it('retrieves, lists the input items of, and deletes a stored response; another organization finds none', async () => {
    const response = await create({ input: [{ role: 'developer', content: 'Be kind.' }, { role: 'user', content: 'Hi' }] });
    expect(await responses.get({ org_id: 'org_1', response_id: response.id })).toEqual(response);
    const items = await responses.listInputItems({ org_id: 'org_1', response_id: response.id, limit: 1, order: 'desc' });
    expect(items).toEqual({
      object: 'list',
      data: [{ type: 'message', id: expect.any(String), role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'Hi' }] }],
      first_id: items.data[0]!.id,
      last_id: items.data[0]!.id,
      has_more: true,
    });
    const rest = await responses.listInputItems({ org_id: 'org_1', response_id: response.id, limit: 20, order: 'desc', after: items.last_id! });
    expect(rest).toMatchObject({ data: [{ role: 'developer' }], has_more: false });
    for (const call of [
      () => responses.get({ org_id: 'org_2', response_id: response.id }),
      () => responses.delete({ org_id: 'org_2', response_id: response.id }),
      () => create({ input: 'Hi', previous_response_id: response.id }, 'org_2'),
    ]) {
      await expect(call()).rejects.toMatchObject({ status: 404, code: 'resource_not_found' });
    }
    expect(await responses.delete({ org_id: 'org_1', response_id: response.id })).toEqual({ id: response.id, object: 'response.deleted', deleted: true });
    await expect(responses.get({ org_id: 'org_1', response_id: response.id })).rejects.toMatchObject({ status: 404 });
    await expect(responses.delete({ org_id: 'org_1', response_id: response.id })).rejects.toMatchObject({ status: 404 });
  });

  it('resolves an item reference to the stored item it names', async () => {
    const first = await create({ input: 'Plant tomatoes?' });
    await create({ input: [{ type: 'item_reference', id: first.output[0].id }, { role: 'user', content: 'And peppers?' }] });
    expect(provider.requests[1]!.messages).toEqual([
      { role: 'assistant', content: 're: Plant tomatoes?' },
      { role: 'user', content: 'And peppers?' },
    ]);
    await expect(create({ input: [{ type: 'item_reference', id: first.output[0].id }] }, 'org_2')).rejects.toMatchObject({ status: 404, param: 'input[0].id' });
  });

  it('keeps nothing for store: false, still charging the completion', async () => {
    const response = await create({ input: 'Hi', store: false });
    expect(response.store).toBe(false);
    await expect(responses.get({ org_id: 'org_1', response_id: response.id })).rejects.toMatchObject({ status: 404 });
    expect((await chat.listSessions({ org_id: 'org_1', limit: 20 })).data).toEqual([]);
    expect(funds.map((f) => f[0])).toEqual(['reserve', 'capture']);
  });

  it('streams the chat chunks as numbered Responses events, recording the response before it ends', async () => {
    const accepted = await create({ input: 'Hello there', stream_to: 'chat.streams.r1' });
    expect(accepted).toEqual({ id: expect.stringMatching(/^resp_/), stream_to: 'chat.streams.r1' });
    await ended;
    expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => i));
    const end = frames.at(-1)!;
    expect(end.kind).toBe('end');
    const events = frames.flatMap((f) => (f.kind === 'data' ? [f.data as ResponseStreamEvent] : []));
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const completed = events.at(-1) as Extract<ResponseStreamEvent, { type: 'response.completed' }>;
    expect(completed.response).toMatchObject({ id: accepted.id, status: 'completed', output: [{ content: [{ text: 're: Hello there' }] }] });
    expect(await responses.get({ org_id: 'org_1', response_id: accepted.id })).toEqual(completed.response);
    expect(end.kind === 'end' && end.usage.total_tokens).toBe(completed.response.usage!.total_tokens);
    expect(funds.map((f) => f[0])).toEqual(['reserve', 'capture']);
  });
});
