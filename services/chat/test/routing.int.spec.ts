import { ManualClock, sortableIds, type StreamFrame } from '@oc/contracts';
import { CommandHandler, openSqliteStores } from '@oc/eventstore';
import { ProjectionRunner, readYourWrites, SqliteReadModelStore } from '@oc/readmodel';
import { DEFAULT_BREAKER, type DeploymentSpec, DeploymentPool, ProviderError } from '@oc/routing';
import { createLogger } from '@oc/telemetry';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RoutedChatProvider, type ChatTarget } from '../src/adapters/routed-provider';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { type ChatDeps, ChatService } from '../src/application/chat';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { chatProjections } from '../src/projections/chat-projections';
import { chatCollections } from '../src/projections/documents';

type Fault = 'ok' | '500' | '429' | 'timeout' | 'cut' | 'hang';

/**
 * A provider that answers each call as the test scripts it: a whole answer with its usage, an HTTP failure, a
 * timeout, an answer cut off after its first words, or a hang (no answer until the caller gives up).
 */
class FaultyProvider implements ChatProvider {
  calls = 0;
  constructor(
    readonly name: string,
    private readonly fault: () => Fault,
    private readonly words = ['Water', ' the', ' roots', ' early.'],
  ) {}

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    this.calls++;
    const fault = this.fault();
    if (fault === '500') throw new ProviderError({ kind: 'retryable', status: 500, message: `${this.name} answered 500.` });
    if (fault === '429') throw new ProviderError({ kind: 'retryable', status: 429, message: `${this.name} answered 429.`, retryAfterMs: 1_000 });
    if (fault === 'timeout') throw new ProviderError({ kind: 'retryable', message: `${this.name} did not answer in time.` });
    if (fault === 'hang') {
      // What an adapter does with a provider that never answers: gives up after its timeout.
      await new Promise((resolve) => setImmediate(resolve));
      throw new ProviderError({ kind: 'retryable', message: `${this.name} did not answer in time.` });
    }
    for (const [i, word] of this.words.entries()) {
      if (signal.aborted) return;
      if (fault === 'cut' && i === 2) throw new ProviderError({ kind: 'retryable', message: `${this.name} failed while answering.` });
      yield { type: 'content', text: word };
    }
    yield { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: request.promptTokens ?? 0, completion_tokens: this.words.length, total_tokens: (request.promptTokens ?? 0) + this.words.length } };
  }
}

/** The same draws in every run: the fault pattern is part of the test. */
function seeded(seed: number) {
  let s = seed;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

const target = (provider: ChatProvider, cost = { input: 0, output: 0 }): ChatTarget => ({ provider, features: new Set(['temperature', 'stop']), costMicrosPerSecond: 0, costMicrosPer1M: cost }) as ChatTarget;
const spec = (id: string, provider: ChatProvider, weight = 1, cost?: { input: number; output: number }): DeploymentSpec<ChatTarget> => ({
  id,
  provider: id,
  model: `${id}-model`,
  weight,
  target: target(provider, cost),
});

describe('chat-2 across deployments', () => {
  let stores: ReturnType<typeof openSqliteStores>;
  let projections: ProjectionRunner;
  let readModels: SqliteReadModelStore;
  let clock: ManualClock;
  let chat: ChatService;
  let pool: DeploymentPool<ChatTarget>;
  let captures: Array<{ id: string; amount: number; usage: unknown }>;
  let releases: string[];
  let frames: StreamFrame[];

  const start = async (specs: Array<DeploymentSpec<ChatTarget>>, random = seeded(7), models: ChatDeps['models'] = {}) => {
    readModels = new SqliteReadModelStore({ filename: ':memory:' });
    projections = new ProjectionRunner(stores.store, readModels, chatProjections, { collections: chatCollections });
    await projections.start();
    pool = new DeploymentPool(specs, { now: () => clock.now(), random });
    const provider = new RoutedChatProvider({ model: 'chat-2', pool, now: () => clock.now(), onFailure: () => {} });
    const commands = new CommandHandler(stores.store);
    chat = new ChatService({
      eventStore: stores.store,
      commands,
      readModels: readYourWrites(readModels, projections, commands),
      provider,
      simulator: new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }),
      tokenizer: gptTokenizer,
      deployments: () => [],
      models,
      funds: {
        reserve: async () => {},
        capture: async (_org, id, amount, usage) => void captures.push({ id, amount, usage }),
        release: async (_org, id) => void releases.push(id),
        holders: async () => [],
        releaseHeld: async () => ({ released: 0, more: false }),
      },
      frames: { publish: async (_subject, frame) => void frames.push(frame as StreamFrame) },
      clock,
      ids: sortableIds,
      pricing: { microsPer1kTokens: 80_000, defaultMaxTokens: 64, contextTokens: 128_000 },
      lifecycle: { replica: 'chat-a', deadlineMs: 60_000 },
      logger: createLogger({ service: 'chat-test', level: 'silent' }),
    });
  };

  beforeEach(() => {
    clock = new ManualClock(Date.UTC(2026, 10, 27));
    stores = openSqliteStores({ filename: ':memory:' });
    captures = [];
    releases = [];
    frames = [];
  });
  afterEach(async () => {
    await chat.close();
    await projections.stop();
    await stores.close();
  });

  const ask = (extra: Record<string, unknown> = {}) =>
    chat.createChatCompletion({ model: 'chat-2', messages: [{ role: 'user', content: 'How do I grow tomatoes?' }], stream: false, temperature: undefined, org_id: 'org_1', mode: 'live', ...extra }) as Promise<any>;

  it('answers 1,000 requests without one error while a deployment fails 30% of its calls, each charged exactly once for its usage', async () => {
    const draw = seeded(42);
    const faults: Fault[] = ['500', '429', 'timeout', 'cut', 'hang'];
    const flaky = new FaultyProvider('flaky', () => (draw() < 0.3 ? faults[Math.floor(draw() * faults.length)]! : 'ok'));
    const steady = new FaultyProvider('steady', () => 'ok');
    await start([spec('flaky', flaky), spec('steady', steady)]);
    const answers = [];
    for (let i = 0; i < 1_000; i++) {
      answers.push(await ask());
      // Time passes between requests, so that a deployment asked to wait is tried again later.
      clock.advance(250);
    }
    expect(answers.every((a) => a.choices[0].message.content === 'Water the roots early.')).toBe(true);
    expect(new Set(captures.map((c) => c.id)).size).toBe(1_000);
    expect(captures).toHaveLength(1_000);
    expect(releases).toEqual([]);
    for (const [i, a] of answers.entries()) expect(captures[i]!.amount).toBe(a.usage.total_tokens * 80);
    // Both served: the flaky one took what it could.
    const served = captures.map((c) => (c.usage as { deployment: string }).deployment);
    // Its breaker opened now and then (five failures in a row happen at 30%), sending it less than its half.
    expect(served.filter((d) => d === 'flaky').length).toBeGreaterThan(100);
    expect(served.filter((d) => d === 'steady').length).toBeGreaterThan(300);
    expect(flaky.calls).toBeGreaterThan(served.filter((d) => d === 'flaky').length);
  });

  it('moves traffic off a deployment that is down, and brings it back through a half-open trial once it recovers', async () => {
    let broken = true;
    const sometimes = new FaultyProvider('sometimes', () => (broken ? '500' : 'ok'));
    const steady = new FaultyProvider('steady', () => 'ok');
    await start([spec('sometimes', sometimes), spec('steady', steady, 0)]);
    for (let i = 0; i < 20; i++) await ask();
    expect(sometimes.calls).toBe(DEFAULT_BREAKER.consecutiveFailures);
    expect(pool.stats().find((s) => s.id === 'sometimes')!.circuit).toBe('open');
    expect(steady.calls).toBe(20);
    broken = false;
    clock.advance(DEFAULT_BREAKER.cooldownMs);
    await ask();
    expect(sometimes.calls).toBe(DEFAULT_BREAKER.consecutiveFailures + 1);
    expect(pool.stats().find((s) => s.id === 'sometimes')!.circuit).toBe('closed');
    await ask();
    expect(sometimes.calls).toBe(DEFAULT_BREAKER.consecutiveFailures + 2);
    expect(steady.calls).toBe(20);
    expect(captures).toHaveLength(22);
  });

  it('answers 503 with Retry-After when every deployment is down, and charges nothing', async () => {
    await start([spec('a', new FaultyProvider('a', () => '500')), spec('b', new FaultyProvider('b', () => '429'))]);
    const failure = await ask().catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 503, code: 'upstream_error', retryAfter: 1 });
    expect((failure as Error).message).not.toMatch(/answered/);
    expect(captures).toEqual([]);
    expect(releases).toHaveLength(1);
  });

  it('ends a stream cut after its first words with an error event, and charges the prompt and the words delivered', async () => {
    const cut = new FaultyProvider('cut', () => 'cut');
    const spare = new FaultyProvider('spare', () => 'ok');
    await start([spec('cut', cut), spec('spare', spare, 0)]);
    await ask({ stream: true, stream_to: 'chat.streams.s1' });
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toMatch(/end|error/));
    const data = frames.filter((f) => f.kind === 'data').map((f) => (f as { data: any }).data);
    const text = data.map((d) => d.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe('Water the');
    expect(frames.at(-1)).toMatchObject({ kind: 'error', error: { status: 503, code: 'upstream_error' } });
    // Nothing fails over once words reached the client: the spare was never asked.
    expect(spare.calls).toBe(0);
    const prompt = gptTokenizer.count('How do I grow tomatoes?') + 4 + 3;
    const delivered = gptTokenizer.count('Water the');
    expect(captures).toEqual([
      { id: expect.any(String), amount: (prompt + delivered) * 80, usage: expect.objectContaining({ deployment: 'cut', input_tokens: prompt, output_tokens: delivered }) },
    ]);
  });

  it('fails a stream over when its deployment fails before the first words, and the customer sees one whole answer', async () => {
    const broken = new FaultyProvider('broken', () => '500');
    const spare = new FaultyProvider('spare', () => 'ok');
    await start([spec('broken', broken), spec('spare', spare, 0)]);
    await ask({ stream: true, stream_to: 'chat.streams.s2' });
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toMatch(/end|error/));
    const text = frames
      .filter((f) => f.kind === 'data')
      .map((f) => (f as { data: any }).data.choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe('Water the roots early.');
    expect(frames.at(-1)!.kind).toBe('end');
    expect(captures).toHaveLength(1);
  });

  it("records which deployment served each request, the key that asked, and what it cost us, at the deployment's prices", async () => {
    // 2 USD per million prompt tokens, 10 USD per million completion tokens, in micro-USD.
    await start([spec('priced', new FaultyProvider('priced', () => 'ok'), 1, { input: 2_000_000, output: 10_000_000 })]);
    const answer = await ask({ key_id: 'key_backend' });
    const { prompt_tokens, completion_tokens } = answer.usage;
    expect(captures[0]!.usage).toEqual({
      key_id: 'key_backend',
      product: 'chat',
      model: 'chat-2',
      deployment: 'priced',
      provider: 'priced',
      upstream_model: 'priced-model',
      input_tokens: prompt_tokens,
      output_tokens: completion_tokens,
      provider_cost_micros: Math.ceil((prompt_tokens * 2_000_000 + completion_tokens * 10_000_000) / 1_000_000),
    });
  });

  it('refuses a parameter no deployment accepts with 400 unsupported_parameter, before anything is held', async () => {
    const noTemperature: ChatTarget = { ...target(new FaultyProvider('strict', () => 'ok')), features: new Set(['stop']) };
    await start([{ id: 'strict', provider: 'anthropic', model: 'm', weight: 1, target: noTemperature }]);
    const failure = await ask({ temperature: 0.2 }).catch((error: unknown) => error);
    expect(failure).toMatchObject({ detail: { code: 'unsupported_parameter', param: 'temperature' } });
    // Without it, the same deployment serves the request.
    expect((await ask()).choices[0].message.content).toBe('Water the roots early.');
  });

  it('sends a request that uses a parameter only to the deployments that accept it', async () => {
    const strict = new FaultyProvider('strict', () => 'ok');
    const lenient = new FaultyProvider('lenient', () => 'ok');
    await start([
      { id: 'strict', provider: 'anthropic', model: 'm', weight: 100, target: { ...target(strict), features: new Set(['stop']) } },
      { id: 'lenient', provider: 'openai', model: 'm', weight: 1, target: target(lenient) },
    ]);
    for (let i = 0; i < 5; i++) await ask({ temperature: 0.5 });
    expect(strict.calls).toBe(0);
    expect(lenient.calls).toBe(5);
  });

  it("serves a model of the operator's own at its own price, under its own name, and refuses one it does not serve", async () => {
    const own = new FaultyProvider('own', () => 'ok', ['Short', ' answer.']);
    const budget = new RoutedChatProvider({ model: 'budget-chat', pool: new DeploymentPool([spec('own', own)], { now: () => clock.now(), random: () => 0 }), now: () => clock.now(), onFailure: () => {} });
    // 0.02 USD per 1,000 tokens: 20 micro-USD a token.
    await start([spec('main', new FaultyProvider('main', () => 'ok'))], seeded(7), { 'budget-chat': { provider: budget, microsPer1kTokens: 20_000 } });
    const answer = await ask({ model: 'budget-chat' });
    expect(answer).toMatchObject({ model: 'budget-chat', choices: [{ message: { content: 'Short answer.' } }] });
    expect(captures[0]).toMatchObject({ amount: answer.usage.total_tokens * 20, usage: { model: 'budget-chat', deployment: 'own' } });
    expect(own.calls).toBe(1);
    const unknown = await ask({ model: 'gpt-4o' }).catch((error: unknown) => error);
    expect(unknown).toMatchObject({ detail: { code: 'invalid_model', param: 'model' } });
    expect((unknown as Error & { detail: { message: string } }).detail.message).toContain('chat-2, budget-chat');
  });
});
