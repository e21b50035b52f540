import { z } from 'zod';
import { PublicModelIdSchema } from './model-id';
import { ApiErrorSchema } from './errors';
import { ListQuery } from './billing';
import { Subjects } from './subjects';
import type { ValidationCodes } from './validation';

/** The spec's public chat model; each upstream provider maps it to a model of its own. */
export const CHAT_MODELS = ['chat-2'] as const;
/**
 * A chat model id: `chat-2`, or a model of the operator's own catalog. Which ones are served is the chat
 * service's to say (400 `invalid_model` otherwise), since only it has the catalog.
 */
export const ChatModelSchema = PublicModelIdSchema;

export const ChatRoleSchema = z.enum(['system', 'user', 'assistant']);
export type ChatRole = z.infer<typeof ChatRoleSchema>;

/** Messages keep only what we use: other OpenAI message fields (`name` …) are dropped, not refused. */
export const ChatMessageSchema = z.object({
  role: ChatRoleSchema,
  content: z.string().max(1_000_000),
});
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** The spec shows the corners at ±1 and nothing beyond, so each coordinate is kept within them. */
export const TheoryPositionSchema = z.object({
  x: z.number().min(-1).max(1),
  y: z.number().min(-1).max(1),
});
export type TheoryPosition = z.infer<typeof TheoryPositionSchema>;

const StreamOptionsSchema = z.object({ include_usage: z.boolean().optional() }).nullish();
const StopSchema = z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(4)]).nullish();

/**
 * POST /v1/chat/completions. Not strict: OpenAI fields we do not support (`n`, `top_p`, `user` …) are
 * ignored so that existing clients keep working.
 */
export const CreateChatCompletionBody = z.object({
  model: ChatModelSchema,
  messages: z.array(ChatMessageSchema).min(1).max(10_000),
  stream: z.boolean().nullish().transform((v) => v ?? false),
  stream_options: StreamOptionsSchema,
  temperature: z.number().min(0).max(2).nullish().transform((v) => v ?? undefined),
  max_tokens: z.int().positive().max(1_000_000).nullish(),
  stop: StopSchema,
  session_id: z.string().min(1).max(200).optional(),
  'x-theory-position': TheoryPositionSchema.optional(),
});
export type CreateChatCompletion = z.output<typeof CreateChatCompletionBody>;

/** POST /v1/completions: OpenAI's legacy Completions request. */
export const CreateCompletionBody = z.object({
  model: ChatModelSchema,
  prompt: z.union([z.string().max(1_000_000), z.array(z.string().max(1_000_000)).min(1).max(20)]),
  max_tokens: z.int().positive().max(1_000_000).nullish().transform((v) => v ?? 16),
  temperature: z.number().min(0).max(2).nullish().transform((v) => v ?? undefined),
  stream: z.boolean().nullish().transform((v) => v ?? false),
  stream_options: StreamOptionsSchema,
  stop: StopSchema,
});
export type CreateCompletion = z.output<typeof CreateCompletionBody>;

/** The spec's codes for chat bodies: `model` is `invalid_model` whether missing or wrong. */
export const CHAT_VALIDATION_CODES: ValidationCodes = { model: { invalid: 'invalid_model', missing: 'invalid_model' } };

export const UsageSchema = z.object({
  prompt_tokens: z.int().nonnegative(),
  completion_tokens: z.int().nonnegative(),
  total_tokens: z.int().nonnegative(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const FinishReasonSchema = z.enum(['stop', 'length']);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

export const ChatCompletionSchema = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      message: z.object({ role: z.literal('assistant'), content: z.string() }),
      finish_reason: FinishReasonSchema,
    }),
  ),
  usage: UsageSchema,
  session_id: z.string(),
});
export type ChatCompletion = z.infer<typeof ChatCompletionSchema>;

export const ChatCompletionChunkSchema = z.object({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      delta: z.object({ role: z.literal('assistant').optional(), content: z.string().optional() }),
      finish_reason: FinishReasonSchema.nullable(),
    }),
  ),
  session_id: z.string(),
  /** Present only when the request asked for `stream_options.include_usage`. */
  usage: UsageSchema.nullable().optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunkSchema>;

const TextChoiceSchema = z.object({
  text: z.string(),
  index: z.int(),
  logprobs: z.null(),
  finish_reason: FinishReasonSchema.nullable(),
});

/** OpenAI's `text_completion`, used both for the whole answer and for each streamed chunk. */
export const TextCompletionSchema = z.object({
  id: z.string(),
  object: z.literal('text_completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(TextChoiceSchema),
  usage: UsageSchema.nullable().optional(),
});
export type TextCompletion = z.infer<typeof TextCompletionSchema>;

export const ChatSessionListItemSchema = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created_at: z.int(),
});

export const ChatSessionSchema = ChatSessionListItemSchema.extend({
  messages: z.array(z.object({ role: ChatRoleSchema, content: z.string(), created_at: z.int() })),
});
export type ChatSession = z.infer<typeof ChatSessionSchema>;

/** GET /v1/chat/completions: the spec's `limit` plus OpenAI's `after` cursor. */
export const ListChatSessionsQuery = ListQuery;

// ---------- NATS messages to the chat service ----------

/** Who is asking: test keys are served by the simulator and never charged. */
const Caller = { org_id: z.string().min(1), mode: z.enum(['live', 'test']) };

/**
 * Where a streamed answer goes. The chat service publishes `StreamFrame`s on this subject (one the
 * gateway subscribed to before asking), so a stream is one request/reply plus a broadcast per chunk.
 */
const StreamTarget = { stream_to: z.string().max(200).startsWith(`${Subjects.chat.streamPrefix}.`).optional() };

export const ChatMessages = {
  createChatCompletion: CreateChatCompletionBody.extend({ ...Caller, ...StreamTarget }),
  createCompletion: CreateCompletionBody.extend({ ...Caller, ...StreamTarget }),
  listSessions: ListChatSessionsQuery.extend({ org_id: z.string().min(1) }),
  getSession: z.object({ org_id: z.string().min(1), session_id: z.string().min(1) }),
} as const;
export type ChatMessageOf<K extends keyof typeof ChatMessages> = z.output<(typeof ChatMessages)[K]>;

/** The answer to a streamed create once the work is accepted (funds reserved); chunks follow as frames. */
export const StreamAcceptedSchema = z.object({ id: z.string(), stream_to: z.string() });

/**
 * One message of a streamed answer. `data` carries a chunk exactly as the client sees it; `end` closes
 * the stream (with the usage to count against the day's tokens); `error` closes it with the error the
 * client is shown (a failed call is not charged). `seq` orders frames, all sent by one publisher.
 */
export const StreamFrameSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('data'), seq: z.int(), data: z.record(z.string(), z.unknown()) }),
  z.object({ kind: z.literal('end'), seq: z.int(), usage: UsageSchema }),
  z.object({ kind: z.literal('error'), seq: z.int(), error: ApiErrorSchema }),
]);
export type StreamFrame = z.infer<typeof StreamFrameSchema>;

/** Broadcast by the gateway when a streaming client goes away, so the upstream call stops. */
export const CancelStreamSchema = z.object({ stream_to: z.string().min(1) });

// ---------- Domain events of the chat service ----------

/**
 * The stream categories chat writes (`chat-<session_id>`): its outbox relay publishes these only. A paid
 * completion's durable record is its reservation, in billing's account stream (`FundsReserved.holder`); the
 * `completion-<id>` streams of earlier releases are no longer read or published.
 */
export const ChatStreams = { session: 'chat' } as const;

export const StoredChatMessageSchema = z.object({ role: ChatRoleSchema, content: z.string(), created_at: z.int() });
export type StoredChatMessage = z.infer<typeof StoredChatMessageSchema>;

export const ChatEvents = {
  ChatSessionStarted: z.object({ session_id: z.string(), org_id: z.string(), created_at: z.int() }),
  ChatExchangeRecorded: z.object({
    session_id: z.string(),
    org_id: z.string(),
    completion_id: z.string(),
    messages: z.array(StoredChatMessageSchema),
    usage: UsageSchema,
  }),
} as const;

export type ChatEventType = keyof typeof ChatEvents;
export type ChatEvent = {
  [K in ChatEventType]: { type: K; data: z.infer<(typeof ChatEvents)[K]> };
}[ChatEventType];
