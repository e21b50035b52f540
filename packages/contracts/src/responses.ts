import { z } from 'zod';
import { ChatModelSchema, CHAT_VALIDATION_CODES } from './chat';
import { invalidRequest } from './errors';
import { Subjects } from './subjects';
import { type ValidationCodes, validationError } from './validation';

/**
 * OpenAI's Responses API (`POST /v1/responses` …), the shapes of the `openai` SDK's `resources/responses` types.
 * A request is served by the chat service's chat completion (services/chat/src/domain/responses.ts translates
 * both ways). Every field OpenAI defines is either honoured or refused with 400 `unsupported_parameter`: the body
 * here admits what can be honoured or meaningfully refused, and any other field is refused by `parseCreateResponse`.
 */

const Text = z.string().max(1_000_000);
const ItemStatusSchema = z.enum(['in_progress', 'completed', 'incomplete']);

// ---------- Input ----------

const InputTextPart = z.strictObject({ type: z.literal('input_text'), text: Text });
const InputImagePart = z.strictObject({
  type: z.literal('input_image'),
  image_url: z.string().max(20_000_000).nullish(),
  file_id: z.string().nullish(),
  detail: z.enum(['low', 'high', 'auto', 'original']).optional(),
});
const InputFilePart = z.strictObject({
  type: z.literal('input_file'),
  file_data: z.string().optional(),
  file_id: z.string().nullish(),
  file_url: z.string().optional(),
  filename: z.string().optional(),
});
const OutputTextPart = z.strictObject({
  type: z.literal('output_text'),
  text: Text,
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
});
const RefusalPart = z.strictObject({ type: z.literal('refusal'), refusal: Text });
const ContentPartSchema = z.discriminatedUnion('type', [InputTextPart, InputImagePart, InputFilePart, OutputTextPart, RefusalPart]);
export type ResponseContentPart = z.infer<typeof ContentPartSchema>;

const MessageItem = z.strictObject({
  /** Optional: OpenAI's EasyInputMessage leaves it out. */
  type: z.literal('message').optional(),
  id: z.string().max(200).optional(),
  role: z.enum(['user', 'system', 'developer', 'assistant']),
  content: z.union([Text, z.array(ContentPartSchema).max(1_000)]),
  status: ItemStatusSchema.nullish(),
  phase: z.enum(['commentary', 'final_answer']).nullish(),
});
const FunctionCallItem = z.strictObject({
  type: z.literal('function_call'),
  id: z.string().max(200).optional(),
  call_id: z.string().min(1).max(200),
  name: z.string().min(1).max(200),
  arguments: Text,
  status: ItemStatusSchema.nullish(),
});
const FunctionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  id: z.string().max(200).nullish(),
  call_id: z.string().min(1).max(200),
  output: z.union([Text, z.array(ContentPartSchema).max(1_000)]),
  status: ItemStatusSchema.nullish(),
});
const ItemReference = z.strictObject({ type: z.literal('item_reference'), id: z.string().min(1).max(200) });

export const ResponseInputItemSchema = z.discriminatedUnion('type', [MessageItem, FunctionCallItem, FunctionCallOutputItem, ItemReference]);
export type ResponseInputItem = z.output<typeof ResponseInputItemSchema>;

// ---------- Tools and formats ----------

const JsonObject = z.record(z.string(), z.unknown());

export const ResponseFunctionToolSchema = z.strictObject({
  type: z.literal('function'),
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and -, at most 64'),
  description: z.string().max(100_000).nullish(),
  parameters: JsonObject.nullish(),
  strict: z.boolean().nullish(),
});
export type ResponseFunctionTool = z.infer<typeof ResponseFunctionToolSchema>;

const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), name: z.string().min(1).max(64) }),
  z.strictObject({ type: z.literal('allowed_tools'), mode: z.enum(['auto', 'required']), tools: z.array(JsonObject).max(128) }),
]);
export type ResponseToolChoice = z.infer<typeof ToolChoiceSchema>;

export const ResponseTextFormatSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and -, at most 64'),
    schema: JsonObject,
    description: z.string().max(100_000).optional(),
    strict: z.boolean().nullish(),
  }),
]);
export type ResponseTextFormat = z.infer<typeof ResponseTextFormatSchema>;

/** OpenAI's metadata: up to 16 pairs, keys up to 64 characters, values up to 512. */
const MetadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys');

// ---------- The request ----------

/**
 * POST /v1/responses. Strict: a field not named here is refused as unsupported, never dropped. Some fields are
 * admitted only to be refused by value (`background: true`, `top_p` below 1, `truncation: "disabled"`): the
 * chat service's translation names them.
 */
export const CreateResponseBody = z.strictObject({
  model: ChatModelSchema,
  input: z.union([Text, z.array(ResponseInputItemSchema).min(1).max(10_000)]),
  instructions: Text.nullish(),
  previous_response_id: z.string().min(1).max(200).nullish(),
  max_output_tokens: z.int().positive().max(1_000_000).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  tools: z.array(z.discriminatedUnion('type', [ResponseFunctionToolSchema])).max(128).nullish(),
  tool_choice: ToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.strictObject({ format: ResponseTextFormatSchema.optional(), verbosity: z.enum(['low', 'medium', 'high']).nullish() }).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_obfuscation: z.boolean().optional() }).nullish(),
  store: z.boolean().nullish(),
  metadata: MetadataSchema.nullish(),
  user: z.string().max(512).nullish(),
  safety_identifier: z.string().max(512).nullish(),
  background: z.boolean().nullish(),
  truncation: z.enum(['auto', 'disabled']).nullish(),
  service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullish(),
  include: z.array(z.string().max(200)).max(20).nullish(),
});
export type CreateResponse = z.output<typeof CreateResponseBody>;

/**
 * Validates a Responses API body or query: a field we do not serve, OpenAI's or anyone's, is `unsupported_parameter`
 * naming it (nested ones too: `input[0].type` for an item type we do not offer); a bad value is the usual 400.
 */
export function parseResponsesInput<S extends z.ZodType>(schema: S, input: unknown, codes: ValidationCodes = {}): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = innermost(parsed.error.issues[0]!);
  if (issue.code === 'unrecognized_keys') throw unsupportedParameter(paramOf([...issue.path, issue.keys[0]!]));
  if (issue.code === 'invalid_union' && issue.path.at(-1) === 'type' && issue.errors.length === 0) throw unsupportedParameter(paramOf(issue.path));
  throw validationError(new z.ZodError([issue]), input, codes);
}

/**
 * The problem inside a union none of whose options fit (`input` is a string or items): the one found deepest, in
 * the option that got furthest, so that the 400 names `input[2].role` rather than `input`.
 */
function innermost(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return issue;
  const nested = issue.errors
    .map((option) => option[0])
    .filter((first) => first !== undefined)
    .reduce((deepest, first) => (first.path.length > deepest.path.length ? first : deepest));
  return innermost({ ...nested, path: [...issue.path, ...nested.path] });
}

export const parseCreateResponse = (body: unknown): CreateResponse => parseResponsesInput(CreateResponseBody, body, CHAT_VALIDATION_CODES);

const unsupportedParameter = (param: string, why = 'is not supported here') =>
  invalidRequest('unsupported_parameter', `'${param}' ${why}; send the request without it.`, param);

function paramOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out;
}

// ---------- The response ----------

export const ResponseOutputTextSchema = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()),
  logprobs: z.array(z.unknown()).optional(),
});

export const ResponseOutputMessageSchema = z.object({
  type: z.literal('message'),
  id: z.string(),
  role: z.literal('assistant'),
  status: ItemStatusSchema,
  content: z.array(ResponseOutputTextSchema),
});
export type ResponseOutputMessage = z.infer<typeof ResponseOutputMessageSchema>;

export const ResponseFunctionCallSchema = z.object({
  type: z.literal('function_call'),
  id: z.string(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: ItemStatusSchema,
});
export type ResponseFunctionCall = z.infer<typeof ResponseFunctionCallSchema>;

export const ResponseOutputItemSchema = z.discriminatedUnion('type', [ResponseOutputMessageSchema, ResponseFunctionCallSchema]);
export type ResponseOutputItem = z.infer<typeof ResponseOutputItemSchema>;

export const ResponseUsageSchema = z.object({
  input_tokens: z.int().nonnegative(),
  input_tokens_details: z.object({ cached_tokens: z.int().nonnegative() }),
  output_tokens: z.int().nonnegative(),
  output_tokens_details: z.object({ reasoning_tokens: z.int().nonnegative() }),
  total_tokens: z.int().nonnegative(),
});
export type ResponseUsage = z.infer<typeof ResponseUsageSchema>;

export const ResponseStatusSchema = z.enum(['completed', 'incomplete', 'failed', 'in_progress']);

/** OpenAI's Response object. `output_text` is the SDKs' own convenience, computed client-side: not sent. */
export const ResponseObjectSchema = z.object({
  id: z.string(),
  object: z.literal('response'),
  created_at: z.int(),
  completed_at: z.int().nullable(),
  status: ResponseStatusSchema,
  background: z.boolean(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  incomplete_details: z.object({ reason: z.enum(['max_output_tokens', 'content_filter']) }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.int().nullable(),
  metadata: z.record(z.string(), z.string()),
  model: z.string(),
  output: z.array(ResponseOutputItemSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.string().nullable(),
  reasoning: z.object({ effort: z.null(), summary: z.null() }),
  service_tier: z.literal('default'),
  store: z.boolean(),
  temperature: z.number(),
  text: z.object({ format: ResponseTextFormatSchema, verbosity: z.literal('medium') }),
  tool_choice: ToolChoiceSchema,
  tools: z.array(ResponseFunctionToolSchema),
  top_p: z.number(),
  truncation: z.enum(['auto', 'disabled']),
  usage: ResponseUsageSchema.nullable(),
  user: z.string().nullable(),
  safety_identifier: z.string().nullable(),
});
export type ResponseObject = z.infer<typeof ResponseObjectSchema>;

/** An input item as stored and listed (GET /v1/responses/{id}/input_items): each with its id and status. */
export const ResponseItemSchema = z.union([
  z.object({
    type: z.literal('message'),
    id: z.string(),
    role: z.enum(['user', 'system', 'developer']),
    status: ItemStatusSchema,
    content: z.array(z.union([InputTextPart, InputImagePart, InputFilePart])),
  }),
  ResponseOutputMessageSchema,
  ResponseFunctionCallSchema,
  z.object({
    type: z.literal('function_call_output'),
    id: z.string(),
    call_id: z.string(),
    output: z.union([z.string(), z.array(z.union([InputTextPart, InputImagePart, InputFilePart]))]),
    status: ItemStatusSchema,
  }),
]);
export type ResponseItem = z.infer<typeof ResponseItemSchema>;

export const ResponseItemListSchema = z.object({
  object: z.literal('list'),
  data: z.array(ResponseItemSchema),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

export const DeletedResponseSchema = z.object({ id: z.string(), object: z.literal('response.deleted'), deleted: z.literal(true) });

/** GET /v1/responses/{id}/input_items. `include` asks for extra fields none of our items has: refused. */
export const ListInputItemsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().max(200).optional(),
  order: z.enum(['asc', 'desc']).default('desc'),
});

/** GET /v1/responses/{id}: no query is served (a stored response cannot be streamed again). */
export const RetrieveResponseQuery = z.strictObject({});

// ---------- Stream events ----------

const Seq = { sequence_number: z.int().nonnegative() };
const ItemPosition = { item_id: z.string(), output_index: z.int().nonnegative() };
const PartPosition = { ...ItemPosition, content_index: z.int().nonnegative() };

const lifecycle = <T extends string>(type: T) => z.object({ type: z.literal(type), ...Seq, response: ResponseObjectSchema });
const itemEvent = <T extends string>(type: T) => z.object({ type: z.literal(type), ...Seq, output_index: z.int(), item: ResponseOutputItemSchema });
const partEvent = <T extends string>(type: T) => z.object({ type: z.literal(type), ...Seq, ...PartPosition, part: ResponseOutputTextSchema });

/** The Responses events this API streams, as SSE `event: <type>` with the event as `data`. */
export const ResponseStreamEventSchema = z.discriminatedUnion('type', [
  lifecycle('response.created'),
  lifecycle('response.in_progress'),
  lifecycle('response.completed'),
  lifecycle('response.incomplete'),
  lifecycle('response.failed'),
  itemEvent('response.output_item.added'),
  itemEvent('response.output_item.done'),
  partEvent('response.content_part.added'),
  partEvent('response.content_part.done'),
  z.object({ type: z.literal('response.output_text.delta'), ...Seq, ...PartPosition, delta: z.string(), logprobs: z.array(z.unknown()) }),
  z.object({ type: z.literal('response.output_text.done'), ...Seq, ...PartPosition, text: z.string(), logprobs: z.array(z.unknown()) }),
  z.object({ type: z.literal('response.function_call_arguments.delta'), ...Seq, ...ItemPosition, delta: z.string() }),
  z.object({ type: z.literal('response.function_call_arguments.done'), ...Seq, ...ItemPosition, name: z.string(), arguments: z.string() }),
  z.object({ type: z.literal('error'), ...Seq, code: z.string().nullable(), message: z.string(), param: z.string().nullable() }),
]);
export type ResponseStreamEvent = z.infer<typeof ResponseStreamEventSchema>;

// ---------- NATS messages to the chat service ----------

const OrgRef = { org_id: z.string().min(1) };
const ResponseRef = { ...OrgRef, response_id: z.string().min(1).max(200) };

export const ResponseMessages = {
  create: CreateResponseBody.extend({
    ...OrgRef,
    mode: z.enum(['live', 'test']),
    /** The API key asking, recorded with the charge (as on a chat completion's request). */
    key_id: z.string().min(1).max(100).optional(),
    stream_to: z.string().max(200).startsWith(`${Subjects.chat.streamPrefix}.`).optional(),
  }),
  get: z.object(ResponseRef),
  delete: z.object(ResponseRef),
  listInputItems: ListInputItemsQuery.extend(ResponseRef),
} as const;
export type ResponseMessageOf<K extends keyof typeof ResponseMessages> = z.output<(typeof ResponseMessages)[K]>;

// ---------- Domain events, in the chat session's stream ----------

export const ResponseEvents = {
  /** A stored response (`store` not false), recorded after its exchange: its request's items and the answer. */
  ResponseRecorded: z.object({
    session_id: z.string(),
    org_id: z.string(),
    completion_id: z.string(),
    response: ResponseObjectSchema,
    input_items: z.array(ResponseItemSchema),
  }),
  ResponseDeleted: z.object({ session_id: z.string(), org_id: z.string(), response_id: z.string(), deleted_at: z.int() }),
} as const;

export type ResponseEventType = keyof typeof ResponseEvents;
export type ResponseEvent = {
  [K in ResponseEventType]: { type: K; data: z.infer<(typeof ResponseEvents)[K]> };
}[ResponseEventType];
