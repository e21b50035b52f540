import {
  ApiError,
  type ChatCompletion,
  type ChatMessage,
  type ChatMessageOf,
  type ChatSession,
  type Clock,
  DomainError,
  type FinishReason,
  type IdSource,
  type StoredChatMessage,
  type TextCompletion,
  toApiError,
  unixSeconds,
  type Usage,
} from '@oc/contracts';
import { aggregateStream, type CommandHandler, type EventStore } from '@oc/eventstore';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import { conversationTokens, trimToContext } from '../domain/context';
import { chargeMicros, costMicros } from '../domain/pricing';
import { conversation, ownedConversation, sessionDecider, sessionStream } from '../domain/session';
import { theoryInstruction } from '../domain/theory';
import { ChatCollections, type ChatSessionDoc } from '../projections/documents';
import type { ChatProvider, FramePublisher, Funds, Tokenizer } from './ports';
import { FrameSequence } from './frames';

export interface ChatPricing {
  /** Integer micro-USD per 1,000 tokens (0.08 USD = 80,000). */
  microsPer1kTokens: number;
  /** Completion tokens reserved for, and asked of the upstream, when a chat request names no `max_tokens`. */
  defaultMaxTokens: number;
  /** What is sent upstream stays under this many tokens (the spec's 128K). */
  contextTokens: number;
}

export interface ChatDeps {
  eventStore: EventStore;
  commands: CommandHandler;
  readModels: ReadModels;
  /** Serves live keys. */
  provider: ChatProvider;
  /** Serves test keys, which are never charged. */
  simulator: ChatProvider;
  tokenizer: Tokenizer;
  funds: Funds;
  frames: FramePublisher;
  clock: Clock;
  ids: IdSource;
  pricing: ChatPricing;
  logger: Logger;
}

type Caller = { org_id: string; mode: 'live' | 'test' };

/** One paid call: each prompt becomes one choice, generated in turn. */
interface Job {
  id: string;
  created: number;
  caller: Caller;
  prompts: Array<{ messages: ChatMessage[]; promptTokens: number }>;
  maxTokens: number;
  temperature: number;
  stop: string[];
  reservedMicros: number;
}

interface Outcome {
  choices: Array<{ text: string; finishReason: FinishReason }>;
  usage: Usage;
}

type Progress = { type: 'content'; index: number; text: string } | { type: 'finish'; index: number; finishReason: FinishReason };
type Sink = (progress: Progress) => Promise<void>;
const discard: Sink = async () => {};

const MODEL = 'chat-2';

export class ChatService {
  /** Streams in flight on this replica, by the subject they publish on: a cancel aborts one. */
  private readonly streams = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(private readonly deps: ChatDeps) {}

  private get sessions() {
    return this.deps.readModels.collection<ChatSessionDoc>(ChatCollections.sessions);
  }

  async createChatCompletion(m: ChatMessageOf<'createChatCompletion'>): Promise<ChatCompletion | { id: string; stream_to: string }> {
    const now = this.deps.clock.now();
    const startsSession = m.session_id === undefined;
    const sessionId = m.session_id ?? this.deps.ids.next('chat_');
    const history = startsSession ? [] : await this.history(m.org_id, sessionId);
    const position = m['x-theory-position'];
    const conversation = trimToContext(
      [
        ...(position ? [{ role: 'system' as const, content: theoryInstruction(position) }] : []),
        ...history,
        ...m.messages,
      ],
      this.deps.pricing.contextTokens,
      this.deps.tokenizer,
    );
    const job = await this.reserve(
      this.deps.ids.next('chatcmpl_'),
      now,
      m,
      [{ messages: conversation.messages, promptTokens: conversation.tokens }],
      m.max_tokens ?? this.deps.pricing.defaultMaxTokens,
      'Chat completion',
    );
    const record = (outcome: Outcome) =>
      this.recordExchange({ job, sessionId, startsSession, sent: m.messages, sentAt: now, reply: outcome.choices[0]?.text ?? '', usage: outcome.usage });

    if (m.stream_to === undefined) {
      const outcome = await this.run(job, discard, new AbortController().signal);
      await record(outcome);
      return {
        id: job.id,
        object: 'chat.completion',
        created: job.created,
        model: MODEL,
        choices: outcome.choices.map((c, index) => ({ index, message: { role: 'assistant', content: c.text }, finish_reason: c.finishReason })),
        usage: outcome.usage,
        session_id: sessionId,
      };
    }

    const includeUsage = m.stream_options?.include_usage === true;
    const chunk = (choices: unknown[], usage?: Usage) => ({
      id: job.id,
      object: 'chat.completion.chunk',
      created: job.created,
      model: MODEL,
      choices,
      session_id: sessionId,
      ...(includeUsage ? { usage: usage ?? null } : {}),
    });
    return this.stream(job, m.stream_to, {
      first: () => [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])],
      progress: (p) =>
        p.type === 'content'
          ? chunk([{ index: p.index, delta: { content: p.text }, finish_reason: null }])
          : chunk([{ index: p.index, delta: {}, finish_reason: p.finishReason }]),
      last: (outcome) => (includeUsage ? [chunk([], outcome.usage)] : []),
      record,
    });
  }

  async createCompletion(m: ChatMessageOf<'createCompletion'>): Promise<TextCompletion | { id: string; stream_to: string }> {
    const prompts = (typeof m.prompt === 'string' ? [m.prompt] : m.prompt).map((prompt) => {
      const messages = [{ role: 'user' as const, content: prompt }];
      return { messages, promptTokens: conversationTokens(messages, this.deps.tokenizer) };
    });
    const job = await this.reserve(this.deps.ids.next('cmpl_'), this.deps.clock.now(), m, prompts, m.max_tokens, 'Text completion');
    const completion = (choices: TextCompletion['choices'], usage?: Usage | null) => ({
      id: job.id,
      object: 'text_completion' as const,
      created: job.created,
      model: MODEL,
      choices,
      ...(usage !== undefined ? { usage } : {}),
    });
    if (m.stream_to === undefined) {
      const outcome = await this.run(job, discard, new AbortController().signal);
      return completion(
        outcome.choices.map((c, index) => ({ text: c.text, index, logprobs: null, finish_reason: c.finishReason })),
        outcome.usage,
      );
    }
    const includeUsage = m.stream_options?.include_usage === true;
    return this.stream(job, m.stream_to, {
      first: () => [],
      progress: (p) =>
        completion(
          [
            p.type === 'content'
              ? { text: p.text, index: p.index, logprobs: null, finish_reason: null }
              : { text: '', index: p.index, logprobs: null, finish_reason: p.finishReason },
          ],
          includeUsage ? null : undefined,
        ),
      last: (outcome) => (includeUsage ? [completion([], outcome.usage)] : []),
      record: async () => {},
    });
  }

  async listSessions(m: ChatMessageOf<'listSessions'>) {
    const page = await pageAfter(this.sessions, { org_id: m.org_id }, 'created_at', m);
    return {
      object: 'list' as const,
      data: page.data.map((doc) => ({ id: doc._id, object: 'chat.completion' as const, created_at: doc.created_at })),
      has_more: page.has_more,
    };
  }

  async getSession(m: ChatMessageOf<'getSession'>): Promise<ChatSession> {
    const doc = await this.sessions.findOne({ _id: m.session_id, org_id: m.org_id });
    if (!doc) throw new DomainError({ kind: 'NotFound', resource: 'chat_session', id: m.session_id });
    return { id: doc._id, object: 'chat.completion', created_at: doc.created_at, messages: doc.messages };
  }

  /** The client of a stream went away: stop its upstream call (only the replica running it has it). */
  cancelStream(streamTo: string) {
    this.streams.get(streamTo)?.abort.abort();
  }

  /** Stops every stream in flight (each still settles its charge) before the process goes. */
  async close() {
    for (const s of this.streams.values()) s.abort.abort();
    await Promise.all([...this.streams.values()].map((s) => s.done));
  }

  async ping() {
    await this.deps.readModels.ping();
    return { status: 'ok' as const };
  }

  /** The stored conversation, from the session's own stream so that the last exchange is always in it. */
  private async history(orgId: string, sessionId: string): Promise<ChatMessage[]> {
    const { state } = await aggregateStream(this.deps.eventStore, sessionStream(sessionId), conversation);
    return ownedConversation(state, orgId, sessionId).map(({ role, content }) => ({ role, content }));
  }

  /** Holds the most the call can cost (every prompt token plus the whole `max_tokens`) before any upstream work. */
  private async reserve(
    id: string,
    now: number,
    request: Caller & { temperature: number; stop?: string | string[] | null | undefined },
    prompts: Job['prompts'],
    maxTokens: number,
    description: string,
  ): Promise<Job> {
    const bound = prompts.reduce((sum, p) => sum + p.promptTokens + maxTokens, 0);
    const reservedMicros = costMicros(bound, this.deps.pricing.microsPer1kTokens);
    if (request.mode === 'live' && reservedMicros > 0) {
      await this.deps.funds.reserve(request.org_id, id, reservedMicros, description);
    }
    return {
      id,
      created: unixSeconds(now),
      caller: { org_id: request.org_id, mode: request.mode },
      prompts,
      maxTokens,
      temperature: request.temperature,
      stop: request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop,
      reservedMicros,
    };
  }

  private charged(job: Job) {
    return job.caller.mode === 'live' && job.reservedMicros > 0;
  }

  /**
   * Generates every choice, then charges exactly the usage (capped at the reservation). A cancelled
   * call is charged for what was generated; a failed one is not charged at all.
   */
  private async run(job: Job, sink: Sink, signal: AbortSignal): Promise<Outcome> {
    let outcome: Outcome;
    try {
      outcome = await this.generate(job, sink, signal);
    } catch (error) {
      if (this.charged(job)) await this.deps.funds.release(job.caller.org_id, job.id);
      throw error;
    }
    if (this.charged(job)) {
      await this.deps.funds.capture(job.caller.org_id, job.id, chargeMicros(outcome.usage, this.deps.pricing.microsPer1kTokens, job.reservedMicros));
    }
    return outcome;
  }

  private async generate(job: Job, sink: Sink, signal: AbortSignal): Promise<Outcome> {
    const provider = job.caller.mode === 'test' ? this.deps.simulator : this.deps.provider;
    const choices: Outcome['choices'] = [];
    const usage: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    for (const [index, prompt] of job.prompts.entries()) {
      if (signal.aborted) break;
      let text = '';
      let finishReason: FinishReason = 'stop';
      let reported: Usage | undefined;
      const request = { messages: prompt.messages, maxTokens: job.maxTokens, temperature: job.temperature, stop: job.stop };
      for await (const event of provider.generate(request, signal)) {
        if (event.type === 'content') {
          text += event.text;
          await sink({ type: 'content', index, text: event.text });
        } else {
          finishReason = event.finishReason;
          reported = event.usage;
          await sink({ type: 'finish', index, finishReason });
        }
      }
      const counted = reported ?? {
        prompt_tokens: prompt.promptTokens,
        completion_tokens: this.deps.tokenizer.count(text),
        total_tokens: 0,
      };
      usage.prompt_tokens += counted.prompt_tokens;
      usage.completion_tokens += counted.completion_tokens;
      usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
      choices.push({ text, finishReason });
    }
    return { choices, usage };
  }

  /**
   * Answers at once (the reservation is made) and streams the rest as frames on `streamTo`, ending
   * with an `end` frame once the charge and the session are stored, or an `error` frame.
   */
  private stream(
    job: Job,
    streamTo: string,
    shape: {
      first(): unknown[];
      progress(p: Progress): unknown;
      last(outcome: Outcome): unknown[];
      record(outcome: Outcome): Promise<void>;
    },
  ) {
    const abort = new AbortController();
    const frames = new FrameSequence(this.deps.frames, streamTo);
    const work = async () => {
      try {
        for (const data of shape.first()) await frames.data(data);
        const outcome = await this.run(job, (p) => frames.data(shape.progress(p)), abort.signal);
        for (const data of shape.last(outcome)) await frames.data(data);
        await shape.record(outcome);
        await frames.end(outcome.usage);
      } catch (error) {
        const apiError = toApiError(error);
        if (!(error instanceof ApiError)) this.deps.logger.error({ err: error }, 'chat stream failed');
        else if (apiError.status >= 500) this.deps.logger.warn({ err: error }, 'chat stream ended by an upstream failure');
        await frames.error(apiError.toData()).catch((err: unknown) => this.deps.logger.warn({ err }, 'stream error not delivered'));
      } finally {
        this.streams.delete(streamTo);
      }
    };
    const entry = { abort, done: Promise.resolve() };
    this.streams.set(streamTo, entry);
    entry.done = work();
    return { id: job.id, stream_to: streamTo };
  }

  private async recordExchange(x: {
    job: Job;
    sessionId: string;
    startsSession: boolean;
    sent: ChatMessage[];
    sentAt: number;
    reply: string;
    usage: Usage;
  }) {
    const sentAt = unixSeconds(x.sentAt);
    const messages: StoredChatMessage[] = [
      ...x.sent.map((m) => ({ role: m.role, content: m.content, created_at: sentAt })),
      { role: 'assistant', content: x.reply, created_at: unixSeconds(this.deps.clock.now()) },
    ];
    await this.deps.commands.handle(sessionStream(x.sessionId), sessionDecider, {
      type: 'RecordExchange',
      sessionId: x.sessionId,
      orgId: x.job.caller.org_id,
      startsSession: x.startsSession,
      completionId: x.job.id,
      messages,
      usage: x.usage,
      now: sentAt,
    });
  }
}
