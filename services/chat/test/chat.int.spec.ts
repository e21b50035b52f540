import { ApiError, type ChatMessage, contentText, ManualClock, sortableIds, type StreamFrame, unixSeconds } from '@oc/contracts';
import { CommandHandler, openSqliteStores } from '@oc/eventstore';
import { ProjectionRunner, readYourWrites, SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { ChatService } from '../src/application/chat';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { chatProjections } from '../src/projections/chat-projections';
import { chatCollections } from '../src/projections/documents';

/** An upstream that records what it was sent and plays back words, optionally waiting forever midway. */
class ScriptedProvider implements ChatProvider {
  requests: GenerationRequest[] = [];
  words = ['Plant', ' early', ' and', ' water', ' often.'];
  /** Stop after this many words and wait until aborted. */
  hangAfter: number | undefined;
  failAfter: number | undefined;

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    this.requests.push(request);
    for (const [i, word] of this.words.entries()) {
      if (i === this.failAfter) throw new ApiError({ status: 503, type: 'service_unavailable_error', code: 'upstream_error', message: 'down' });
      if (i === this.hangAfter) {
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        return;
      }
      yield { type: 'content', text: word };
    }
    yield { type: 'finish', finishReason: 'stop' };
  }
}

describe('chat service', () => {
  let stores: ReturnType<typeof openSqliteStores>;
  let projections: ProjectionRunner;
  let provider: ScriptedProvider;
  let chat: ChatService;
  let funds: Array<[string, ...unknown[]]>;
  /** What billing holds open: reservation id → its organization, holder and expiry. */
  let held: Map<string, { org: string; holder: string; expiresAt: number }>;
  let frames: StreamFrame[];
  let clock: ManualClock;
  let readModels: SqliteReadModelStore;
  /** Billing's answer to the next reservation when set: a 402 holds nothing; any other, the answer was lost after it held the funds. */
  let refuse: ApiError | undefined;
  /** Billing unreachable for captures, releases and the sweep's questions while set. */
  let unreachable: ApiError | undefined;
  const DEADLINE_MS = 60_000;

  /** A replica of the chat service on the shared stores. */
  const replica = (name: string, contextTokens = 128_000, gone?: ReadonlySet<string>) => {
    const commands = new CommandHandler(stores.store);
    return new ChatService({
      eventStore: stores.store,
      commands,
      readModels: readYourWrites(readModels, projections, commands),
      provider,
      simulator: new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }),
      tokenizer: gptTokenizer,
      deployments: () => [],
      funds: {
        reserve: async (org, id, amount, _description, hold) => {
          funds.push(['reserve', org, id, amount]);
          if (refuse?.status !== 402) held.set(id, { org, ...hold });
          if (refuse) throw refuse;
        },
        capture: async (org, id, amount) => {
          if (unreachable) throw unreachable;
          funds.push(['capture', org, id, amount]);
          held.delete(id);
        },
        release: async (org, id) => {
          if (unreachable) throw unreachable;
          funds.push(['release', org, id]);
          held.delete(id);
        },
        holders: async (prefix) => {
          if (unreachable) throw unreachable;
          return [...new Set([...held.values()].map((h) => h.holder).filter((h) => h.startsWith(prefix)))].sort();
        },
        releaseHeld: async (holder) => {
          if (unreachable) throw unreachable;
          const ids = [...held].filter(([, h]) => h.holder === holder).map(([id]) => id);
          for (const id of ids) {
            funds.push(['release', held.get(id)!.org, id]);
            held.delete(id);
          }
          return { released: ids.length, more: false };
        },
      },
      frames: { publish: async (_subject, frame) => void frames.push(frame as StreamFrame) },
      clock,
      ids: sortableIds,
      pricing: { microsPer1kTokens: 80_000, defaultMaxTokens: 256, contextTokens },
      lifecycle: { replica: name, deadlineMs: DEADLINE_MS },
      ...(gone ? { replicas: { self: name, shared: true, isGone: async (other: string) => other !== name && gone.has(other) } } : {}),
      logger: createLogger({ service: 'chat-test', level: 'silent' }),
    });
  };

  const start = async (contextTokens = 128_000) => {
    readModels = new SqliteReadModelStore({ filename: ':memory:' });
    projections = new ProjectionRunner(stores.store, readModels, chatProjections, { collections: chatCollections });
    await projections.start();
    chat = replica('chat-a', contextTokens);
  };

  const openReservations = () => [...held.keys()];

  beforeEach(() => {
    clock = new ManualClock(Date.UTC(2026, 10, 22));
    refuse = undefined;
    unreachable = undefined;
    stores = openSqliteStores({ filename: ':memory:' });
    provider = new ScriptedProvider();
    funds = [];
    held = new Map();
    frames = [];
  });
  afterEach(async () => {
    await chat.close();
    await projections.stop();
    await stores.close();
  });

  const ask = (content: string, extra: Record<string, unknown> = {}) =>
    chat.createChatCompletion({
      model: 'chat-2',
      messages: [{ role: 'user', content }],
      stream: false,
      temperature: 1,
      org_id: 'org_1',
      mode: 'live',
      ...extra,
    }) as Promise<any>;
  const promptTokens = (messages: ChatMessage[]) => messages.reduce((n, m) => n + gptTokenizer.count(contentText(m.content)) + 4, 3);

  it('reserves the prompt plus max_tokens (or the default cap) and captures exactly the usage', async () => {
    await start();
    const answer = await ask('How do I start a garden?', { max_tokens: 50 });
    const prompt = promptTokens([{ role: 'user', content: 'How do I start a garden?' }]);
    expect(answer.usage).toEqual({ prompt_tokens: prompt, completion_tokens: gptTokenizer.count('Plant early and water often.'), total_tokens: expect.any(Number) });
    expect(funds).toEqual([
      ['reserve', 'org_1', answer.id, (prompt + 50) * 80],
      ['capture', 'org_1', answer.id, answer.usage.total_tokens * 80],
    ]);
    funds.length = 0;
    const capped = await ask('Again?');
    expect(provider.requests.at(-1)!.maxTokens).toBe(256);
    expect(funds[0]).toEqual(['reserve', 'org_1', capped.id, (capped.usage.prompt_tokens + 256) * 80]);
  });

  it('never touches the funds of a test key, and serves it from the simulator', async () => {
    await start();
    const answer = await ask('Hello', { mode: 'test' });
    expect(answer.choices[0].message.content).toMatch(/^(You asked|Here is|Let us)/);
    expect(funds).toEqual([]);
    expect(provider.requests).toEqual([]);
  });

  it('releases the reservation when the upstream fails, and keeps no session', async () => {
    await start();
    provider.failAfter = 2;
    const failure = await ask('Hello').catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 503, code: 'upstream_error' });
    expect(funds.map((f) => f[0])).toEqual(['reserve', 'release']);
    expect((await chat.listSessions({ org_id: 'org_1', limit: 20 })).data).toEqual([]);
  });

  it('trims the oldest history to stay under the context limit, keeping system messages and the newest', async () => {
    await start(60);
    const first = await chat.createChatCompletion({
      model: 'chat-2',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Tell me about tomatoes and how they grow in the summer.' },
      ],
      stream: false,
      temperature: 1,
      org_id: 'org_1',
      mode: 'live',
    });
    const sessionId = (first as { session_id: string }).session_id;
    await ask('And peppers, do they need the same care?', { session_id: sessionId });
    await ask('What about winter?', { session_id: sessionId });
    const sent = provider.requests.at(-1)!.messages;
    expect(promptTokens(sent)).toBeLessThan(60);
    expect(sent[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'What about winter?' });
    expect(sent).not.toContainEqual({ role: 'user', content: 'Tell me about tomatoes and how they grow in the summer.' });
    // The session itself keeps everything.
    expect((await chat.getSession({ org_id: 'org_1', session_id: sessionId })).messages).toHaveLength(7);
  });

  it("sends a stream's first frame with its answer, before the upstream is asked: the client's first byte does not wait for the upstream", async () => {
    await start();
    const accepted = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    expect(frames).toEqual([{ kind: 'data', seq: 0, data: expect.objectContaining({ id: accepted.id, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) }]);
    expect(provider.requests).toHaveLength(0);
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toBe('end'));
    expect(provider.requests).toHaveLength(1);
  });

  it('stops a stream cancelled before its upstream call starts: nothing is asked, nothing charged, the stream ends', async () => {
    await start();
    provider.hangAfter = 0;
    const accepted = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    // The client leaves as soon as it is answered, before the upstream call (which starts in a later turn).
    chat.cancelStream('chat.streams.s1');
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toBe('end'));
    expect(provider.requests).toHaveLength(0);
    expect(funds.at(-1)).toEqual(['capture', 'org_1', accepted.id, 0]);
  });

  it('stops a cancelled stream, charges the prompt and the words generated, and still ends the stream', async () => {
    await start();
    provider.hangAfter = 2;
    const accepted = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    await vi.waitFor(() => expect(frames.filter((f) => f.kind === 'data')).toHaveLength(3));
    chat.cancelStream('chat.streams.s1');
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toBe('end'));
    const prompt = promptTokens([{ role: 'user', content: 'Hello' }]);
    const usage = { prompt_tokens: prompt, completion_tokens: gptTokenizer.count('Plant early'), total_tokens: prompt + gptTokenizer.count('Plant early') };
    expect(frames.at(-1)).toEqual({ kind: 'end', seq: 3, usage });
    expect(funds.at(-1)).toEqual(['capture', 'org_1', accepted.id, usage.total_tokens * 80]);
  });

  it('drains: what ends within the grace is charged in full; then a stream is cut with a 503 frame, charged for what it delivered, and a completion answered whole gets a 503, released', async () => {
    await start();
    const done = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    await vi.waitFor(() => expect(frames.at(-1)?.kind).toBe('end'));
    frames.length = 0;
    provider.hangAfter = 2;
    const cut = (await ask('Hello', { stream_to: 'chat.streams.s2' })) as { id: string };
    const whole = ask('Hello').catch((error: unknown) => error);
    await vi.waitFor(() => expect(frames.filter((f) => f.kind === 'data')).toHaveLength(3));
    await vi.waitFor(() => expect(provider.requests).toHaveLength(3));

    await chat.drain(20);
    const unavailable = expect.objectContaining({ status: 503, type: 'service_unavailable_error', code: 'service_unavailable' });
    expect(frames.at(-1)).toEqual({ kind: 'error', seq: 3, error: unavailable });
    expect(await whole).toEqual(unavailable);
    const prompt = promptTokens([{ role: 'user', content: 'Hello' }]);
    expect(funds.filter((f) => f[0] !== 'reserve')).toEqual([
      ['capture', 'org_1', done.id, (prompt + gptTokenizer.count('Plant early and water often.')) * 80],
      ['capture', 'org_1', cut.id, (prompt + gptTokenizer.count('Plant early')) * 80],
      ['release', 'org_1', expect.stringMatching(/^chatcmpl_/)],
    ]);
    expect(openReservations()).toEqual([]);
  });

  it('gives up unpaid a completion answered whole when its caller cancels it by its own subject', async () => {
    await start();
    provider.hangAfter = 2;
    const whole = chat
      .createChatCompletion({ model: 'chat-2', messages: [{ role: 'user', content: 'Hello' }], stream: false, temperature: 1, org_id: 'org_1', mode: 'live' }, { watchTo: 'chat.streams.w1' })
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(provider.requests).toHaveLength(1));
    chat.cancelStream('chat.streams.w1');
    expect(await whole).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(funds.map((f) => f[0])).toEqual(['reserve', 'release']);
  });

  it('settles each paid completion durably: none is left open once it is charged, released or refused', async () => {
    await start();
    await ask('Hello');
    provider.failAfter = 1;
    await ask('Hello').catch(() => undefined);
    provider.failAfter = undefined;
    refuse = new ApiError({ status: 402, type: 'insufficient_quota', code: 'insufficient_quota', message: 'no' });
    await expect(ask('Hello')).rejects.toMatchObject({ status: 402 });
    expect(openReservations()).toEqual([]);
    // A failed call is released; a reservation refused for funds held nothing, so there is nothing to release.
    expect(funds.map((f) => f[0])).toEqual(['reserve', 'capture', 'reserve', 'release', 'reserve']);
  });

  it('releases, at its next sweep, what it could not settle while billing was unreachable (no waiting for the deadline)', async () => {
    await start();
    const down = new ApiError({ status: 503, type: 'service_unavailable_error', code: 'service_unavailable', message: 'billing down' });
    // A reservation whose answer was lost (billing may hold it), then a capture that failed: both held.
    refuse = down;
    unreachable = down;
    await expect(ask('Hello')).rejects.toMatchObject({ status: 503 });
    refuse = undefined;
    await expect(ask('Hello again')).rejects.toMatchObject({ status: 503 });
    expect(openReservations()).toHaveLength(2);
    await expect(chat.settleAbandoned()).rejects.toMatchObject({ status: 503 });
    expect(openReservations()).toHaveLength(2);

    unreachable = undefined;
    expect(await chat.settleAbandoned()).toBe(2);
    expect(funds.filter((f) => f[0] === 'release')).toHaveLength(2);
    expect(openReservations()).toEqual([]);
    expect(await chat.settleAbandoned()).toBe(0);
  });

  it('answers 503, not charged, when billing refuses the capture because the hold is gone (lost with a billing crash, or lapsed)', async () => {
    await start();
    for (const refused of [
      new ApiError({ status: 404, type: 'invalid_request_error', code: 'not_found', message: "No reservation 'cmpl_x' on this account" }),
      new ApiError({ status: 409, type: 'invalid_request_error', code: 'reservation_expired', message: 'expired' }),
    ]) {
      unreachable = refused;
      const answer = ask('Hello');
      await expect(answer).rejects.toMatchObject({ status: 503, code: 'service_unavailable' });
      await expect(answer).rejects.toThrow(/not charged; retry/);
    }
    expect(funds.filter((f) => f[0] === 'capture')).toEqual([]);
  });

  it('after a crash, the restarted replica releases what its completions in flight still held, and nothing else', async () => {
    await start();
    provider.hangAfter = 2;
    const crashed = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    await vi.waitFor(() => expect(frames.filter((f) => f.kind === 'data')).toHaveLength(3));
    const other = replica('chat-b');
    const elsewhere = (await other.createChatCompletion({
      model: 'chat-2',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: false,
      stream_to: 'chat.streams.s2',
      temperature: 1,
      org_id: 'org_1',
      mode: 'live',
    })) as { id: string };
    expect(openReservations()).toEqual(expect.arrayContaining([crashed.id, elsewhere.id]));
    // A replica's sweep leaves alone what its own process is running.
    expect(await chat.settleAbandoned()).toBe(0);

    // chat-a is started again (its process died with the stream): it settles its own, not chat-b's live one.
    clock.advance(1_000);
    const restarted = replica('chat-a');
    expect(await restarted.settleAbandoned()).toBe(1);
    expect(funds.at(-1)).toEqual(['release', 'org_1', crashed.id]);
    expect(openReservations()).toEqual([elsewhere.id]);
    expect(await restarted.settleAbandoned()).toBe(0);

    // Were chat-b never to come back (no presence here), billing's expiry releases its completion a minute past the deadline.
    expect(held.get(elsewhere.id)!.expiresAt).toBe(unixSeconds(Date.UTC(2026, 10, 22) + DEADLINE_MS + 60_000));
    await other.close();
  });

  it('with replicas, settles at once what a gone replica left open, and leaves a live replica\'s alone', async () => {
    await start();
    const gone = new Set<string>();
    chat = replica('chat-a', 128_000, gone);
    provider.hangAfter = 2;
    const running = (await ask('Hello', { stream_to: 'chat.streams.s1' })) as { id: string };
    await vi.waitFor(() => expect(frames.filter((f) => f.kind === 'data')).toHaveLength(3));
    const survivor = replica('chat-b', 128_000, gone);
    expect(await survivor.settleAbandoned()).toBe(0);
    expect(openReservations()).toEqual([running.id]);

    // chat-a's process is killed: chat-b does not wait for the deadline.
    gone.add('chat-a');
    expect(await survivor.settleAbandoned()).toBe(1);
    expect(funds.at(-1)).toEqual(['release', 'org_1', running.id]);
    expect(openReservations()).toEqual([]);
    await survivor.close();
  });
});
