import {
  ApiError,
  CHAT_VALIDATION_CODES,
  ChatCompletionSchema,
  ChatSessionListItemSchema,
  ChatSessionSchema,
  CreateChatCompletionBody,
  CreateCompletionBody,
  ListChatSessionsQuery,
  listOf,
  parseChatCompletionBody,
  parseOrThrow,
  randomId,
  rateLimited,
  type Reply,
  type StreamFrame,
  StreamFrameSchema,
  Subjects,
  TextCompletionSchema,
  type Usage,
} from '@oc/contracts';
import { chatTokenWindow } from '../domain/limits';
import { responsesRoutes } from './responses-routes';
import type { Route, RouteContext } from './routes';

export interface ChatRouteOptions {
  /** Longest silence between two frames of a stream before the client is told it failed. */
  streamIdleTimeoutMs?: number;
  /** Completions one organization may have running on this gateway at once (streams until they end). */
  maxInFlightPerOrganization?: number;
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
  const idleMs = options.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_MS;
  const max = options.maxInFlightPerOrganization ?? DEFAULT_CHAT_IN_FLIGHT_PER_ORGANIZATION;
  const inFlight = new InFlight(max);
  const complete: Complete = async (ctx, subject, body, format = chatCompletionEvents) => {
    const orgId = ctx.principal.org_id;
    if (!inFlight.enter(orgId)) throw rateLimited(1, `${max} completions in flight per organization`);
    try {
      return await completion(ctx, subject, body, idleMs, format);
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

async function completion(
  ctx: RouteContext,
  subject: string,
  body: { stream: boolean },
  idleMs: number,
  format: () => SseFormat,
): Promise<Reply<unknown> | void> {
  const window = chatTokenWindow(ctx.principal);
  const room = await ctx.limits.peek(window);
  if (!room.allowed) throw rateLimited(room.retryAfterSeconds, 'chat tokens per day');
  const message = { ...body, org_id: ctx.principal.org_id, mode: ctx.principal.mode };
  if (!body.stream) {
    const reply = await ctx.services.request<{ usage: Usage }>(subject, message, { headers: ctx.headers, timeoutMs: COMPLETION_TIMEOUT_MS });
    if (reply.ok) await ctx.limits.record(window, reply.data.usage.total_tokens);
    return reply;
  }

  // Subscribe before asking, so no frame published after the answer can be missed.
  const streamTo = `${Subjects.chat.streamPrefix}.${randomId()}`;
  const frames = new FrameQueue();
  const subscription = await ctx.services.onBroadcast(streamTo, (payload) => frames.push(payload));
  try {
    const accepted = await ctx.services.request(subject, { ...message, stream_to: streamTo }, { headers: ctx.headers });
    if (!accepted.ok) return accepted;
    await relay(ctx, streamTo, frames, idleMs, (usage) => ctx.limits.record(window, usage.total_tokens), format());
  } finally {
    await subscription.stop();
  }
}

/**
 * Writes the frames as Server-Sent Events. When the client goes away the chat service is told to
 * stop, and the stream is still followed to its end to count the tokens that were generated.
 */
async function relay(ctx: RouteContext, streamTo: string, frames: FrameQueue, idleMs: number, used: (usage: Usage) => Promise<void>, format: SseFormat) {
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
    if (!frame) {
      send(format.error({ type: 'api_error', code: 'stream_timeout', message: `The stream stalled for more than ${idleMs} ms.` }));
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

/** Frames in `seq` order, whatever order the transport delivered them in. */
class FrameQueue {
  private readonly pending = new Map<number, StreamFrame>();
  private expected = 0;
  private wake: (() => void) | undefined;

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
  async next(idleMs: number): Promise<StreamFrame | undefined> {
    const deadline = Date.now() + idleMs;
    for (;;) {
      const frame = this.pending.get(this.expected);
      if (frame) {
        this.pending.delete(this.expected++);
        return frame;
      }
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
