import {
  ApiError,
  type ApiErrorData,
  CHAT_VALIDATION_CODES,
  ChatCompletionSchema,
  ChatSessionListItemSchema,
  ChatSessionSchema,
  CreateChatCompletionBody,
  CreateCompletionBody,
  fail,
  ListChatSessionsQuery,
  listOf,
  parseChatCompletionBody,
  parseOrThrow,
  randomId,
  rateLimited,
  type Reply,
  type ReplicaNotice,
  ReplicaNoticeSchema,
  serviceUnavailable,
  type StreamFrame,
  StreamFrameSchema,
  Subjects,
  TextCompletionSchema,
  type Usage,
  WATCH_TO_HEADER,
} from '@oc/contracts';
import type { ReplicaWatch } from '@oc/messaging';
import { chatTokenWindow } from '../domain/limits';
import { shuttingDown } from './drain';
import { responsesRoutes } from './responses-routes';
import type { Route, RouteContext } from './routes';

export interface ChatRouteOptions {
  /** Longest silence between two frames of a stream before the client is told it failed. */
  streamIdleTimeoutMs?: number;
  /** Completions one organization may have running on this gateway at once (streams until they end). */
  maxInFlightPerOrganization?: number;
  /** Where chat replicas answer presence: a completion whose replica is gone is failed at once. */
  replicas?: ReplicaWatch;
  /** Aborted when this gateway's stop is out of grace: the completions still running are given up. */
  cut?: AbortSignal;
}

/** Non-streamed completions are answered only once generated; this bounds the wait. */
const COMPLETION_TIMEOUT_MS = 300_000;
const DEFAULT_STREAM_IDLE_MS = 60_000;
export const DEFAULT_CHAT_IN_FLIGHT_PER_ORGANIZATION = 64;

/** Each organization's completions running on this gateway. */
class InFlight {
  private readonly counts = new Map<string, number>();
  constructor(private readonly max: number) {}

  enter(orgId: string): boolean {
    const running = this.counts.get(orgId) ?? 0;
    if (running >= this.max) return false;
    this.counts.set(orgId, running + 1);
    return true;
  }

  leave(orgId: string): void {
    const running = this.counts.get(orgId)! - 1;
    if (running === 0) this.counts.delete(orgId);
    else this.counts.set(orgId, running);
  }
}

/**
 * Chat and text completions. The gateway validates the body (400s), checks the day's token window and
 * the organization's completions in flight (429s), and counts the tokens used once the answer is known,
 * streamed or not. The in-flight bound keeps one organization's heaviest requests (a megabyte of prompt
 * each) from queueing up in front of everyone else's.
 */
export function chatRoutes(options: ChatRouteOptions = {}): Route[] {
  const waiting: Waiting = { idleMs: options.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_MS, replicas: options.replicas, cut: options.cut };
  const max = options.maxInFlightPerOrganization ?? DEFAULT_CHAT_IN_FLIGHT_PER_ORGANIZATION;
  const inFlight = new InFlight(max);
  const complete: Complete = async (ctx, subject, body, format = chatCompletionEvents) => {
    const orgId = ctx.principal.org_id;
    if (!inFlight.enter(orgId)) throw rateLimited(1, `${max} completions in flight per organization`);
    try {
      return await completion(ctx, subject, body, waiting, format);
    } finally {
      inFlight.leave(orgId);
    }
  };
  return [
    {
      method: 'POST',
      path: '/v1/chat/completions',
      scope: 'chat:write',
      chat: true,
      model: true,
      doc: {
        summary: 'Create a chat completion (Server-Sent Events with stream: true)',
        // 404: a session_id that names no session of the organization.
        errors: [402, 404],
        request: CreateChatCompletionBody,
        response: ChatCompletionSchema,
        media: ['text/event-stream'],
      },
      handle: (ctx) => complete(ctx, Subjects.chat.createChatCompletion, parseChatCompletionBody(ctx.body)),
    },
    {
      method: 'GET',
      path: '/v1/chat/completions',
      scope: 'chat:read',
      chat: true,
      doc: { summary: 'List chat sessions, newest first', query: ListChatSessionsQuery, response: listOf(ChatSessionListItemSchema) },
      handle: ({ services, principal, query, headers }) =>
        services.request(Subjects.chat.listSessions, { ...parseOrThrow(ListChatSessionsQuery, query), org_id: principal.org_id }, { headers }),
    },
    {
      method: 'GET',
      path: '/v1/chat/completions/:id',
      scope: 'chat:read',
      chat: true,
      doc: { summary: 'Retrieve a chat session with its messages', response: ChatSessionSchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(Subjects.chat.getSession, { org_id: principal.org_id, session_id: params.id }, { headers }),
    },
    {
      method: 'POST',
      path: '/v1/completions',
      scope: 'text:write',
      chat: true,
      model: true,
      doc: {
        summary: "Create a text completion (OpenAI's legacy Completions; Server-Sent Events with stream: true)",
        errors: [402],
        request: CreateCompletionBody,
        response: TextCompletionSchema,
        media: ['text/event-stream'],
      },
      handle: (ctx) => complete(ctx, Subjects.chat.createCompletion, parseOrThrow(CreateCompletionBody, ctx.body, CHAT_VALIDATION_CODES)),
    },
    // The Responses API shares the organization's completions in flight and the chat limits.
    ...responsesRoutes(complete),
  ];
}

/** Runs a completion within the organization's bound: answered whole, or streamed as events of `format`. */
export type Complete = (ctx: RouteContext, subject: string, body: { stream: boolean }, format?: () => SseFormat) => Promise<Reply<unknown> | void>;

/** How one stream's frames are written as Server-Sent Events (a fresh one per stream: it may count what it wrote). */
export interface SseFormat {
  data(data: Record<string, unknown>): string;
  /** What closes a stream that ended well, if anything. */
  done: string | undefined;
  error(error: { type: string; message: string; code: string; param?: string }): string;
}

/** Chat Completions' stream: `data:` lines, an error as `{error}` (what the SDKs raise), closed by `[DONE]`. */
const chatCompletionEvents = (): SseFormat => ({
  data: (data) => `data: ${JSON.stringify(data)}\n\n`,
  done: 'data: [DONE]\n\n',
  error: ({ type, message, code }) => `data: ${JSON.stringify({ error: { type, message, code } })}\n\n`,
});

/** How long, and on what, the gateway waits for a completion. */
interface Waiting {
  idleMs: number;
  replicas: ReplicaWatch | undefined;
  cut: AbortSignal | undefined;
}

/** The replica running a completion is gone (killed, or stopped without finishing it). */
const replicaGone = () => serviceUnavailable('The chat service stopped while answering; retry the request.');

async function completion(
  ctx: RouteContext,
  subject: string,
  body: { stream: boolean },
  waiting: Waiting,
  format: () => SseFormat,
): Promise<Reply<unknown> | void> {
  const window = chatTokenWindow(ctx.principal);
  const room = await ctx.limits.peek(window);
  if (!room.allowed) throw rateLimited(room.retryAfterSeconds, 'chat tokens per day');
  const message = { ...body, org_id: ctx.principal.org_id, mode: ctx.principal.mode, key_id: ctx.principal.key_id };
  // The request's own subject: its frames, and the notice of the replica that runs it, come there; a cancel names it.
  const own = `${Subjects.chat.streamPrefix}.${randomId()}`;
  const givenUp = new GivenUp(waiting.cut);
  const frames = new FrameQueue();
  const heard = (payload: unknown) => {
    if (!isNotice(payload)) return frames.push(payload);
    const notice = ReplicaNoticeSchema.safeParse(payload);
    if (notice.success && waiting.replicas) givenUp.watch(waiting.replicas, notice.data);
  };
  // Subscribed before asking, so that nothing published after the answer can be missed.
  const subscription = body.stream || waiting.replicas ? await ctx.services.onBroadcast(own, heard) : undefined;
  const giveUp = () => void ctx.services.broadcast(Subjects.chat.cancelStream, { stream_to: own });
  try {
    if (!body.stream) {
      const headers = { ...ctx.headers, [WATCH_TO_HEADER]: own };
      const asked = ctx.services.request<{ usage: Usage }>(subject, message, { headers, timeoutMs: COMPLETION_TIMEOUT_MS });
      const answer = await givenUp.before(asked);
      if ('givenUp' in answer) {
        giveUp();
        return fail(answer.givenUp);
      }
      if (answer.ok) await ctx.limits.record(window, answer.data.usage.total_tokens);
      return answer;
    }
    const accepted = await givenUp.before(ctx.services.request(subject, { ...message, stream_to: own }, { headers: ctx.headers }));
    if ('givenUp' in accepted) {
      giveUp();
      return fail(accepted.givenUp);
    }
    if (!accepted.ok) return accepted;
    void givenUp.reason.then((error) => frames.giveUp(error.toBody().error));
    await relay(ctx, own, frames, waiting.idleMs, (usage) => ctx.limits.record(window, usage.total_tokens), format(), giveUp);
  } finally {
    givenUp.stop();
    await subscription?.stop();
  }
}

const isNotice = (payload: unknown) => (payload as { kind?: unknown } | null)?.kind === 'replica';

/**
 * Why the gateway gives a completion up before the chat service ends it: the replica running it is gone (it said
 * which in a `ReplicaNotice`), or this gateway's stop is out of grace. `reason` resolves with the client's error.
 */
class GivenUp {
  readonly reason: Promise<ApiError>;
  private give!: (error: ApiError) => void;
  private readonly stops: Array<() => void> = [];

  constructor(cut: AbortSignal | undefined) {
    this.reason = new Promise((resolve) => (this.give = resolve));
    if (!cut) return;
    const onCut = () => this.give(shuttingDown());
    if (cut.aborted) onCut();
    cut.addEventListener('abort', onCut, { once: true });
    this.stops.push(() => cut.removeEventListener('abort', onCut));
  }

  watch(replicas: ReplicaWatch, notice: ReplicaNotice) {
    this.stops.push(replicas.watch('chat', notice.replica, notice.incarnation, () => this.give(replicaGone())));
  }

  /** The answer, unless the request is given up first. */
  before<T>(answer: Promise<T>): Promise<T | { givenUp: ApiError }> {
    return Promise.race([answer, this.reason.then((error) => ({ givenUp: error }))]);
  }

  stop() {
    for (const stop of this.stops.splice(0)) stop();
  }
}

/**
 * Writes the frames as Server-Sent Events. When the client goes away the chat service is told to
 * stop, and the stream is still followed to its end to count the tokens that were generated. A stream the
 * gateway gives up (stalled, its replica gone, this gateway out of grace) ends with an error event, and the
 * chat service is told to stop too: the stream is charged for what it delivered.
 */
async function relay(
  ctx: RouteContext,
  streamTo: string,
  frames: FrameQueue,
  idleMs: number,
  used: (usage: Usage) => Promise<void>,
  format: SseFormat,
  giveUp: () => void,
) {
  const { res } = ctx;
  res.statusCode = 200;
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no');
  // The headers go at once, or with the first frame when it is here already (one write, one packet).
  if (!frames.ready()) res.flushHeaders();
  let gone = false;
  const cancel = () => {
    if (gone || res.writableFinished) return;
    gone = true;
    void ctx.services.broadcast(Subjects.chat.cancelStream, { stream_to: streamTo });
  };
  res.on('close', cancel);
  // The client may have left while the funds were being reserved.
  if (res.destroyed) cancel();
  const send = (text: string | undefined) => {
    if (!gone && text !== undefined) res.write(text);
  };
  for (;;) {
    const frame = await frames.next(idleMs);
    if (!frame || frame.kind === 'given_up') {
      send(format.error(frame?.error ?? { type: 'api_error', code: 'stream_timeout', message: `The stream stalled for more than ${idleMs} ms.` }));
      if (!gone) giveUp();
      break;
    }
    if (frame.kind === 'data') {
      send(format.data(frame.data));
      continue;
    }
    if (frame.kind === 'end') {
      await used(frame.usage);
      send(format.done);
    } else {
      send(format.error(new ApiError(frame.error).toBody().error));
    }
    break;
  }
  res.end();
}

type GivenUpFrame = { kind: 'given_up'; error: Pick<ApiErrorData, 'type' | 'message' | 'code'> };

/** Frames in `seq` order, whatever order the transport delivered them in. */
class FrameQueue {
  private readonly pending = new Map<number, StreamFrame>();
  private expected = 0;
  private wake: (() => void) | undefined;
  private givenUp: GivenUpFrame | undefined;

  /** Ends the stream with this error, after the frames already here in order. */
  giveUp(error: GivenUpFrame['error']) {
    this.givenUp = { kind: 'given_up', error };
    this.wake?.();
  }

  push(payload: unknown) {
    const parsed = StreamFrameSchema.safeParse(payload);
    if (!parsed.success) return;
    this.pending.set(parsed.data.seq, parsed.data);
    this.wake?.();
  }

  /** Whether `next` has a frame to give now. */
  ready(): boolean {
    return this.pending.has(this.expected);
  }

  /** The next frame, or undefined when none came within `idleMs`. */
  async next(idleMs: number): Promise<StreamFrame | GivenUpFrame | undefined> {
    const deadline = Date.now() + idleMs;
    for (;;) {
      const frame = this.pending.get(this.expected);
      if (frame) {
        this.pending.delete(this.expected++);
        return frame;
      }
      if (this.givenUp) return this.givenUp;
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }
}
