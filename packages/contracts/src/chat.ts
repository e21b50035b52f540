import { z } from 'zod';
import { PublicModelIdSchema } from './model-id';
import { ApiError, ApiErrorSchema } from './errors';
import {
  ChatMessageSchema,
  ChatRoleSchema,
  ChoiceLogprobsSchema,
  ContentPartSchema,
  FunctionToolSchema,
  MAX_TOOLS,
  MetadataSchema,
  ResponseFormatSchema,
  ToolCallDeltaSchema,
  ToolCallSchema,
  ToolChoiceSchema,
} from './chat-messages';
import { ListQuery } from './billing';
import { Subjects } from './subjects';
import { type ValidationCodes, validationError } from './validation';

export * from './chat-messages';

/** The spec's public chat model; each upstream provider maps it to a model of its own. */
export const CHAT_MODELS = ['chat-2'] as const;
/**
 * A chat model id: `chat-2`, or a model of the operator's own catalog. Which ones are served is the chat
 * service's to say (400 `invalid_model` otherwise), since only it has the catalog.
 */
export const ChatModelSchema = PublicModelIdSchema;

/** The spec shows the corners at ±1 and nothing beyond, so each coordinate is kept within them. */
export const TheoryPositionSchema = z.object({
  x: z.number().min(-1).max(1),
  y: z.number().min(-1).max(1),
});
export type TheoryPosition = z.infer<typeof TheoryPositionSchema>;

const StreamOptionsSchema = z.strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).nullish();
const StopSchema = z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(4)]).nullish();

const REFUSED = 'Not offered: any value but null is refused with 400 unsupported_parameter.';

/** Most choices one request may ask for (`n`): each is generated and billed, and all are reserved for up front. */
export const MAX_CHOICES = 8;

/**
 * POST /v1/chat/completions: OpenAI's Chat Completions request. Strict: a field not named here is refused with
 * 400 `unsupported_parameter` (see `parseChatCompletionBody`), never silently ignored. Fields we honour only on
 * some deployments are refused by the chat service when none serving the model takes them.
 */
export const CreateChatCompletionBody = z
  .strictObject({
    model: ChatModelSchema,
    messages: z.array(ChatMessageSchema).min(1).max(10_000),
    stream: z.boolean().nullish().transform((v) => v ?? false),
    stream_options: StreamOptionsSchema,
    temperature: z.number().min(0).max(2).nullish().transform((v) => v ?? undefined),
    max_tokens: z.int().positive().max(1_000_000).nullish(),
    /** OpenAI's newer name for `max_tokens`: caps the output and the reservation alike. */
    max_completion_tokens: z.int().positive().max(1_000_000).nullish(),
    stop: StopSchema,
    n: z.int().min(1).max(MAX_CHOICES).nullish(),
    tools: z.array(FunctionToolSchema).max(MAX_TOOLS).nullish(),
    tool_choice: ToolChoiceSchema.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    response_format: ResponseFormatSchema.nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.int().min(0).max(20).nullish(),
    seed: z.int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).nullish(),
    top_p: z.number().min(0).max(1).nullish(),
    frequency_penalty: z.number().min(-2).max(2).nullish(),
    presence_penalty: z.number().min(-2).max(2).nullish(),
    logit_bias: z
      .record(z.string().regex(/^\d{1,7}$/, 'a token id'), z.number().min(-100).max(100))
      .refine((bias) => Object.keys(bias).length <= 1024, 'at most 1,024 tokens')
      .nullish(),
    user: z.string().max(256).nullish(),
    safety_identifier: z.string().max(64).nullish(),
    prompt_cache_key: z.string().max(256).nullish(),
    prompt_cache_retention: z.enum(['in-memory', '24h']).nullish(),
    reasoning_effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullish(),
    verbosity: z.enum(['low', 'medium', 'high']).nullish(),
    /** Kept with the exchange in the session (we are the store); never sent upstream. */
    metadata: MetadataSchema.nullish(),
    /** `auto` and `default` are what every call gets; the priced tiers (`flex`, `scale`, `priority`) are refused. */
    service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullish(),
    /** False is what every call gets (sessions are our store); true, storing at a provider, is refused. */
    store: z.boolean().nullish(),
    /** `["text"]` is what every call gets; audio output is refused. */
    modalities: z.array(z.enum(['text', 'audio'])).max(2).nullish(),
    // Named so that their refusal names them (REFUSED_CHAT_PARAMETERS); any value but null is refused.
    audio: z.unknown().optional().describe(REFUSED),
    prediction: z.unknown().optional().describe(REFUSED),
    web_search_options: z.unknown().optional().describe(REFUSED),
    functions: z.unknown().optional().describe(REFUSED),
    function_call: z.unknown().optional().describe(REFUSED),
    session_id: z.string().min(1).max(200).optional(),
    'x-theory-position': TheoryPositionSchema.optional(),
  })
  .superRefine((body, ctx) => {
    if (body.max_tokens != null && body.max_completion_tokens != null && body.max_tokens !== body.max_completion_tokens) {
      ctx.addIssue({ code: 'custom', path: ['max_completion_tokens'], message: 'it differs from max_tokens; send one of them' });
    }
    if (body.top_logprobs != null && body.logprobs !== true) {
      ctx.addIssue({ code: 'custom', path: ['top_logprobs'], message: 'it needs logprobs: true' });
    }
    const choice = body.tool_choice;
    const names = new Set((body.tools ?? []).map((t) => t.function.name));
    if (names.size < (body.tools ?? []).length) ctx.addIssue({ code: 'custom', path: ['tools'], message: 'two tools have the same name' });
    if (choice === 'required' && names.size === 0) ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: "'required' needs tools" });
    if (typeof choice === 'object' && choice !== null && !names.has(choice.function.name)) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: `no tool named '${choice.function.name}' is in tools` });
    }
  });
export type CreateChatCompletion = z.output<typeof CreateChatCompletionBody>;

/**
 * OpenAI parameters we refuse whatever the deployment, and why: each would change what is generated or billed in
 * a way we cannot honour (audio output, web searches billed per search, predicted outputs billed beyond
 * max_tokens, storing at a provider, a priced service tier) or is OpenAI's deprecated form of tools.
 */
const REFUSED_CHAT_PARAMETERS: Array<[param: string, refused: (body: CreateChatCompletion) => boolean, why: string]> = [
  ['audio', (b) => b.audio != null, 'audio output is not offered'],
  ['modalities', (b) => b.modalities?.includes('audio') === true, 'only text output is offered'],
  ['prediction', (b) => b.prediction != null, 'predicted outputs are not offered'],
  ['web_search_options', (b) => b.web_search_options != null, 'web search is not offered'],
  ['functions', (b) => b.functions != null, 'functions is deprecated: send tools'],
  ['function_call', (b) => b.function_call != null, 'function_call is deprecated: send tool_choice'],
  ['store', (b) => b.store === true, 'completions are stored as sessions here, not at a provider'],
  ['service_tier', (b) => b.service_tier != null && b.service_tier !== 'auto' && b.service_tier !== 'default', 'only the default tier is offered'],
  ['stream_options.include_obfuscation', (b) => b.stream_options?.include_obfuscation === true, 'stream chunks are not padded'],
];

export const unsupportedParameter = (param: string, message: string) =>
  new ApiError({ status: 400, type: 'invalid_request_error', code: 'unsupported_parameter', message, param });

/**
 * The chat request as the gateway takes it: the schema's 400s, except that a field OpenAI's API may have but ours
 * does not know, and one we refuse outright, are 400 `unsupported_parameter` naming it.
 */
export function parseChatCompletionBody(input: unknown): CreateChatCompletion {
  const parsed = CreateChatCompletionBody.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue?.code === 'unrecognized_keys' && issue.path.length === 0) {
      const param = issue.keys[0]!;
      throw unsupportedParameter(param, `Unsupported parameter: '${param}' is not supported with this model.`);
    }
    throw validationError(parsed.error, input, CHAT_VALIDATION_CODES);
  }
  for (const [param, refused, why] of REFUSED_CHAT_PARAMETERS) {
    if (refused(parsed.data)) throw unsupportedParameter(param, `Unsupported parameter: '${param}' (${why}).`);
  }
  return parsed.data;
}

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

/** `tool_calls`: the model called tools instead of answering; `content_filter`: the provider withheld the rest. */
export const FinishReasonSchema = z.enum(['stop', 'length', 'tool_calls', 'content_filter']);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

export const AssistantAnswerSchema = z.object({
  role: z.literal('assistant'),
  /** Null when the model only called tools. */
  content: z.string().nullable(),
  refusal: z.null(),
  tool_calls: z.array(ToolCallSchema).optional(),
});

export const ChatCompletionSchema = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.int(),
      message: AssistantAnswerSchema,
      /** Null unless the request asked for `logprobs`. */
      logprobs: ChoiceLogprobsSchema.nullable(),
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
      delta: z.object({
        role: z.literal('assistant').optional(),
        content: z.string().nullable().optional(),
        tool_calls: z.array(ToolCallDeltaSchema).optional(),
      }),
      /** Present (with this chunk's tokens) only when the request asked for `logprobs`. */
      logprobs: ChoiceLogprobsSchema.nullable().optional(),
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

/**
 * A message as a session keeps it: what the client sent (content parts, tool calls, tool results) or the answer,
 * with when it was added. Earlier sessions hold `{role, content: string}` only, which this still reads.
 */
export const StoredChatMessageSchema = z.object({
  role: ChatRoleSchema,
  content: z.union([z.string(), z.array(ContentPartSchema), z.null()]),
  name: z.string().optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  created_at: z.int(),
  /** On an answer: the `metadata` its request sent, shown with it when the session is read. */
  metadata: MetadataSchema.optional(),
});
export type StoredChatMessage = z.infer<typeof StoredChatMessageSchema>;

export const ChatSessionSchema = ChatSessionListItemSchema.extend({ messages: z.array(StoredChatMessageSchema) });
export type ChatSession = z.infer<typeof ChatSessionSchema>;

/** GET /v1/chat/completions: the spec's `limit` plus OpenAI's `after` cursor. */
export const ListChatSessionsQuery = ListQuery;

// ---------- NATS messages to the chat service ----------

/**
 * Who is asking: test keys are served by the simulator and never charged. `key_id` names the API key, which the
 * capture records for usage by key (absent from gateways of an earlier release).
 */
const Caller = { org_id: z.string().min(1), mode: z.enum(['live', 'test']), key_id: z.string().min(1).max(100).optional() };

/**
 * Where a streamed answer goes. The chat service publishes `StreamFrame`s on this subject (one the
 * gateway subscribed to before asking), so a stream is one request/reply plus a broadcast per chunk.
 */
const StreamTarget = { stream_to: z.string().max(200).startsWith(`${Subjects.chat.streamPrefix}.`).optional() };

export const ChatMessages = {
  createChatCompletion: CreateChatCompletionBody.safeExtend({ ...Caller, ...StreamTarget }),
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

/**
 * The header that names a completion's own subject when it is answered whole (a streamed one has `stream_to`):
 * the replica that takes it says there which process it is (`ReplicaNotice`), and a cancel naming it gives the
 * work up. A header rather than a field, so that a chat process of an earlier release ignores it instead of
 * refusing the request.
 */
export const WATCH_TO_HEADER = 'oc-watch-to';

/** The subject `WATCH_TO_HEADER` names, when it names one of the completions' own. */
export function watchTo(headers: Record<string, string>): string | undefined {
  const subject = headers[WATCH_TO_HEADER];
  return subject !== undefined && subject.length <= 200 && subject.startsWith(`${Subjects.chat.streamPrefix}.`) ? subject : undefined;
}

/**
 * Published first on a completion's own subject (`stream_to`, or `WATCH_TO_HEADER`'s) by the replica that took it, when
 * replicas answer presence (`Replicas.incarnation`): the caller watches that process, and fails the request as
 * soon as it is gone instead of waiting out its timeouts.
 */
export const ReplicaNoticeSchema = z.object({ kind: z.literal('replica'), replica: z.string().min(1), incarnation: z.string().min(1) });
export type ReplicaNotice = z.infer<typeof ReplicaNoticeSchema>;

/**
 * Broadcast by the gateway when a streaming client goes away, so the upstream call stops; or when it gives a
 * completion up (its replica gone, a stall, its own shutdown), naming its own subject. A stream is
 * charged for what it delivered; a completion answered whole that is given up is not charged.
 */
export const CancelStreamSchema = z.object({ stream_to: z.string().min(1) });

// ---------- Domain events of the chat service ----------

/**
 * The stream categories chat writes (`chat-<session_id>`): its outbox relay publishes these only. A paid
 * completion's durable record is its reservation, in billing's account stream (`FundsReserved.holder`); the
 * `completion-<id>` streams of earlier releases are no longer read or published.
 */
export const ChatStreams = { session: 'chat' } as const;

export const ChatEvents = {
  ChatSessionStarted: z.object({ session_id: z.string(), org_id: z.string(), created_at: z.int() }),
  ChatExchangeRecorded: z.object({
    session_id: z.string(),
    org_id: z.string(),
    completion_id: z.string(),
    messages: z.array(StoredChatMessageSchema),
    usage: UsageSchema,
    /** The request's `metadata`, when it sent any. */
    metadata: MetadataSchema.optional(),
  }),
} as const;

export type ChatEventType = keyof typeof ChatEvents;
export type ChatEvent = {
  [K in ChatEventType]: { type: K; data: z.infer<(typeof ChatEvents)[K]> };
}[ChatEventType];
