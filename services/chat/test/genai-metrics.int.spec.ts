import { type ChatFeature, ManualClock, sortableIds, type StreamFrame } from '@oc/contracts';
import { CommandHandler, openSqliteStores } from '@oc/eventstore';
import { ProjectionRunner, readYourWrites, SqliteReadModelStore } from '@oc/readmodel';
import { DeploymentPool, ProviderError } from '@oc/routing';
import { createLogger } from '@oc/telemetry';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SIMULATOR_FEATURES } from '../src/adapters/provider-defaults';
import { RoutedChatProvider } from '../src/adapters/routed-provider';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { traceChatProvider } from '../src/adapters/traced-provider';
import { ChatService } from '../src/application/chat';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { chatProjections } from '../src/projections/chat-projections';
import { chatCollections } from '../src/projections/documents';

/** An upstream answering five words and the usage it reports, or failing with a 503 when `failing`. */
class Upstream implements ChatProvider {
  failing = false;

  async *generate(_request: GenerationRequest): AsyncIterable<GenerationEvent> {
    if (this.failing) throw new ProviderError({ kind: 'retryable', status: 503, message: 'The provider answered 503.' });
    for (const word of ['Plant', ' early', ' and', ' water', ' often.']) yield { type: 'content', text: word };
    yield { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 } };
  }
}

/** What a chat costs in time and tokens, as OpenTelemetry's GenAI metrics name it, seen through the chat service. */
describe('GenAI metrics of a chat completion', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let stores: ReturnType<typeof openSqliteStores>;
  let readModels: SqliteReadModelStore;
  let projections: ProjectionRunner;
  let upstream: Upstream;
  let chat: ChatService;
  let frames: StreamFrame[];

  beforeEach(async () => {
    tracing = registerTestTracing();
    stores = openSqliteStores({ filename: ':memory:' });
    readModels = new SqliteReadModelStore({ filename: ':memory:' });
    projections = new ProjectionRunner(stores.store, readModels, chatProjections, { collections: chatCollections });
    await projections.start();
    upstream = new Upstream();
    frames = [];
    // As the service is put together with telemetry on: each deployment's calls traced, the router above them.
    const target = {
      provider: traceChatProvider(upstream, { provider: 'openai', model: 'llama-3.1-8b', tokenizer: gptTokenizer }),
      features: new Set(Object.keys(SIMULATOR_FEATURES) as ChatFeature[]),
      costMicrosPer1M: { input: 0, output: 0 },
    };
    const pool = new DeploymentPool([{ id: 'openai', provider: 'openai', model: 'llama-3.1-8b', weight: 1, target }], { now: () => 0, random: () => 0 });
    const commands = new CommandHandler(stores.store);
    chat = new ChatService({
      eventStore: stores.store,
      commands,
      readModels: readYourWrites(readModels, projections, commands),
      provider: new RoutedChatProvider({ model: 'chat-2', pool, now: () => 0, onFailure: () => {} }),
      simulator: new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }),
      tokenizer: gptTokenizer,
      deployments: () => [],
      funds: {
        reserve: async () => {},
        capture: async () => {},
        release: async () => {},
        holders: async () => [],
        releaseHeld: async () => ({ released: 0, more: false }),
      },
      frames: { publish: async (_subject, frame) => void frames.push(frame as StreamFrame) },
      clock: new ManualClock(Date.UTC(2026, 11, 2)),
      ids: sortableIds,
      pricing: { microsPer1kTokens: 80_000, defaultMaxTokens: 256, contextTokens: 128_000 },
      lifecycle: { replica: 'chat-a', deadlineMs: 60_000 },
      logger: createLogger({ service: 'chat-test', level: 'silent' }),
    });
  });
  afterEach(async () => {
    await chat.close();
    await projections.stop();
    await stores.close();
    await tracing.shutdown();
  });

  const ask = (extra: Record<string, unknown> = {}) =>
    chat.createChatCompletion({
      model: 'chat-2',
      messages: [{ role: 'user', content: 'How do I start a garden?' }],
      stream: false,
      temperature: 1,
      org_id: 'org_1',
      mode: 'live',
      ...extra,
    });
  const points = async (name: string) => (await tracing.metrics()).get(name) ?? [];

  const upstreamCall = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'llama-3.1-8b' };
  const answer = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'oc', 'gen_ai.request.model': 'chat-2', 'oc.mode': 'live' };

  it("records the upstream's token usage by type, and each call's and answer's duration, by provider and model", async () => {
    await ask();

    expect(await points('gen_ai.client.token.usage')).toEqual([
      { attributes: { ...upstreamCall, 'gen_ai.token.type': 'input' }, value: expect.objectContaining({ count: 1, sum: 12 }) },
      { attributes: { ...upstreamCall, 'gen_ai.token.type': 'output' }, value: expect.objectContaining({ count: 1, sum: 5 }) },
    ]);
    expect(await points('gen_ai.client.operation.duration')).toEqual([{ attributes: upstreamCall, value: expect.objectContaining({ count: 1 }) }]);
    expect(await points('gen_ai.server.request.duration')).toEqual([
      { attributes: { ...answer, 'gen_ai.response.model': 'llama-3.1-8b' }, value: expect.objectContaining({ count: 1 }) },
    ]);
    // Only a streamed upstream call has a first chunk to time.
    expect(await points('gen_ai.client.operation.time_to_first_chunk')).toEqual([]);
  });

  it("records a stream's time to its first chunk upstream and to its first token served, and the time per token after it", async () => {
    const accepted = (await ask({ stream: true, stream_to: 'chat.streams.s1' })) as { id: string };
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toBe('end'));
    expect(accepted.id).toMatch(/^chatcmpl_/);

    const served = { ...answer, 'gen_ai.response.model': 'llama-3.1-8b' };
    expect(await points('gen_ai.client.operation.time_to_first_chunk')).toEqual([{ attributes: upstreamCall, value: expect.objectContaining({ count: 1 }) }]);
    const [first] = await points('gen_ai.server.time_to_first_token');
    const [whole] = await points('gen_ai.server.request.duration');
    expect(first).toEqual({ attributes: served, value: expect.objectContaining({ count: 1 }) });
    expect(whole).toEqual({ attributes: served, value: expect.objectContaining({ count: 1 }) });
    const [perToken] = await points('gen_ai.server.time_per_output_token');
    // The conventions' definition: what followed the first token, over the four tokens after it.
    const sum = (point: typeof first) => (point!.value as { sum: number }).sum;
    expect(perToken).toEqual({ attributes: served, value: expect.objectContaining({ count: 1 }) });
    expect(sum(perToken)).toBeCloseTo((sum(whole) - sum(first)) / 4, 9);
  });

  it("names a failure's error: the provider's status on the call, the code the customer got on the answer", async () => {
    upstream.failing = true;
    await expect(ask()).rejects.toMatchObject({ code: 'upstream_error' });

    expect(await points('gen_ai.client.operation.duration')).toEqual([{ attributes: { ...upstreamCall, 'error.type': '503' }, value: expect.objectContaining({ count: 1 }) }]);
    expect(await points('gen_ai.server.request.duration')).toEqual([{ attributes: { ...answer, 'error.type': 'upstream_error' }, value: expect.objectContaining({ count: 1 }) }]);
    expect(await points('gen_ai.client.token.usage')).toEqual([]);
    expect(await points('gen_ai.server.time_to_first_token')).toEqual([]);
  });
});
