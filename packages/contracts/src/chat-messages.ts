import { z } from 'zod';

/**
 * The parts of OpenAI's Chat Completions contract that agent frameworks rely on: messages with content parts,
 * tool calls and tool results, function tools, structured outputs and log probabilities. Every array and string
 * is bounded; the request body is at most 1 MiB in any case.
 */

const MAX_TEXT = 1_000_000;
/** Parts of one message: OpenAI names no limit; this is far beyond what clients send. */
const MAX_PARTS = 256;
/** OpenAI's own limit on tools per request. */
export const MAX_TOOLS = 128;
/** JSON schemas nest at most this deep (OpenAI's structured outputs allow 10 levels); bounds what we walk. */
export const MAX_SCHEMA_DEPTH = 32;

/** OpenAI's rule for function names: `a-z`, `A-Z`, `0-9`, `_` and `-`, at most 64. */
export const FunctionNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, "_" and "-", 1 to 64 of them');
/** A participant's name (`name` on a message): passed to providers that take it. */
const ParticipantNameSchema = z.string().min(1).max(64);

export const TextPartSchema = z.strictObject({ type: z.literal('text'), text: z.string().max(MAX_TEXT) });
export type TextPart = z.infer<typeof TextPartSchema>;

const DATA_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const isHttpsUrl = (url: string) => {
  if (!url.startsWith('https://') || url.length > 8192) return false;
  try {
    return new URL(url).protocol === 'https:';
  } catch {
    return false;
  }
};

/** An image the model reads: an https URL, or the image itself as a base64 `data:` URL (PNG, JPEG, GIF or WebP). */
export const ImageUrlSchema = z
  .string()
  .max(MAX_TEXT)
  .refine((url) => isHttpsUrl(url) || DATA_URL.test(url), 'must be an https URL (at most 8,192 characters) or a data:image/{png,jpeg,gif,webp};base64 URL');

export const ImageDetailSchema = z.enum(['auto', 'low', 'high']);
export type ImageDetail = z.infer<typeof ImageDetailSchema>;

export const ImagePartSchema = z.strictObject({
  type: z.literal('image_url'),
  image_url: z.strictObject({ url: ImageUrlSchema, detail: ImageDetailSchema.optional() }),
});
export type ImagePart = z.infer<typeof ImagePartSchema>;

export const ContentPartSchema = z.discriminatedUnion('type', [TextPartSchema, ImagePartSchema]);
export type ContentPart = z.infer<typeof ContentPartSchema>;

const TextContentSchema = z.union([z.string().max(MAX_TEXT), z.array(TextPartSchema).min(1).max(MAX_PARTS)]);

export const ToolCallSchema = z.strictObject({
  id: z.string().min(1).max(256),
  type: z.literal('function'),
  /** `arguments`: the JSON text the model wrote, as it wrote it (it may not parse). */
  function: z.strictObject({ name: FunctionNameSchema, arguments: z.string().max(MAX_TEXT) }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

const SystemMessageSchema = z.strictObject({ role: z.literal('system'), content: TextContentSchema, name: ParticipantNameSchema.optional() });
/** OpenAI's newer name for system instructions; providers without it are sent a system message. */
const DeveloperMessageSchema = z.strictObject({ role: z.literal('developer'), content: TextContentSchema, name: ParticipantNameSchema.optional() });
const UserMessageSchema = z.strictObject({
  role: z.literal('user'),
  content: z.union([z.string().max(MAX_TEXT), z.array(ContentPartSchema).min(1).max(MAX_PARTS)]),
  name: ParticipantNameSchema.optional(),
});
const AssistantMessageSchema = z
  .strictObject({
    role: z.literal('assistant'),
    /** Null (or absent) when the turn was only tool calls. */
    content: z.union([TextContentSchema, z.null()]).optional(),
    name: ParticipantNameSchema.optional(),
    tool_calls: z.array(ToolCallSchema).min(1).max(MAX_TOOLS).optional(),
    /** What our answers carry (always null here); a client that sends the answer back sends it too. */
    refusal: z.string().max(MAX_TEXT).nullish(),
  })
  .refine((m) => (m.content !== undefined && m.content !== null) || m.tool_calls !== undefined, {
    message: 'an assistant message needs content or tool_calls',
    path: ['content'],
  });
/**
 * `name`: the tool's name, which LangChain (every `ToolMessage` a tool returns) and LangGraph send with each result.
 * It repeats the name of the call the result answers (found by `tool_call_id`); OpenAI takes it, and OpenAI-compatible
 * upstreams are sent it as it came.
 */
const ToolMessageSchema = z.strictObject({
  role: z.literal('tool'),
  tool_call_id: z.string().min(1).max(256),
  content: TextContentSchema,
  name: ParticipantNameSchema.optional(),
});

export const ChatMessageSchema = z.discriminatedUnion('role', [
  SystemMessageSchema,
  DeveloperMessageSchema,
  UserMessageSchema,
  AssistantMessageSchema,
  ToolMessageSchema,
]);
export type ChatMessage = z.infer<typeof ChatMessageSchema>;
export const ChatRoleSchema = z.enum(['system', 'developer', 'user', 'assistant', 'tool']);
export type ChatRole = z.infer<typeof ChatRoleSchema>;

/** The text of a message's content: its text parts joined, images left out (what tokenizers and transcripts read). */
export function contentText(content: string | ReadonlyArray<ContentPart> | null | undefined): string {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
}

/** Whether a message instructs the model (system, or OpenAI's developer). */
export const isInstruction = (message: Pick<ChatMessage, 'role'>) => message.role === 'system' || message.role === 'developer';

/** Whether a JSON value nests no deeper than `max` (the walk stops as soon as it is deeper). */
export function nestsWithin(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return true;
  if (max === 0) return false;
  for (const child of Object.values(value)) if (!nestsWithin(child, max - 1)) return false;
  return true;
}

/** A JSON Schema given by the client (tool parameters, a response format): an object, bounded in depth. */
export const JsonSchemaSchema = z
  .record(z.string(), z.unknown())
  .refine((schema) => nestsWithin(schema, MAX_SCHEMA_DEPTH), `nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
export type JsonSchema = z.infer<typeof JsonSchemaSchema>;

export const FunctionToolSchema = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: FunctionNameSchema,
    description: z.string().max(10_000).optional(),
    /** The arguments' JSON Schema; absent means no arguments. */
    parameters: JsonSchemaSchema.optional(),
    /** Arguments that follow the schema exactly (OpenAI's structured outputs). */
    strict: z.boolean().nullish(),
  }),
});
export type FunctionTool = z.infer<typeof FunctionToolSchema>;

export const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: FunctionNameSchema }) }),
]);
export type ToolChoice = z.infer<typeof ToolChoiceSchema>;

export const ResponseFormatSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    json_schema: z.strictObject({
      name: FunctionNameSchema,
      description: z.string().max(10_000).optional(),
      schema: JsonSchemaSchema.optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;

/** OpenAI's metadata: at most 16 pairs, keys up to 64 characters, values up to 512. */
export const MetadataSchema = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys');
export type Metadata = z.infer<typeof MetadataSchema>;

// ---------- what answers carry ----------

export const TopLogprobSchema = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.int()).nullable() });
export const TokenLogprobSchema = TopLogprobSchema.extend({ top_logprobs: z.array(TopLogprobSchema) });
export type TokenLogprob = z.infer<typeof TokenLogprobSchema>;
/** `choices[].logprobs`: one entry per generated token of the content. */
export const ChoiceLogprobsSchema = z.object({ content: z.array(TokenLogprobSchema).nullable(), refusal: z.array(TokenLogprobSchema).nullable() });
export type ChoiceLogprobs = z.infer<typeof ChoiceLogprobsSchema>;

/** A streamed fragment of a tool call: the first names it (`id`, `type`, `function.name`), the rest add arguments. */
export const ToolCallDeltaSchema = z.object({
  index: z.int(),
  id: z.string().optional(),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string().optional() }),
});
export type ToolCallDelta = z.infer<typeof ToolCallDeltaSchema>;
