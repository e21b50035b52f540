import type Anthropic from '@anthropic-ai/sdk';
import { type ChatMessage, type ContentPart, contentText, type FunctionTool, isInstruction, type TextPart, type ToolCall } from '@oc/contracts';
import { ProviderError } from '@oc/routing';
import type { GenerationRequest } from '../application/ports';
import { featuresUsed } from '../domain/features';
import { ANTHROPIC_CHAT_DEFAULT } from './provider-defaults';

/**
 * OpenAI's Chat Completions request as Anthropic's Messages API takes it
 * (https://platform.claude.com/docs/en/api/messages): the translation only, no calls.
 */

export type Params = Omit<Anthropic.MessageCreateParamsNonStreaming, 'stream'>;

const PROVIDER = 'Anthropic';

/** What this translation honours: exactly what an Anthropic deployment declares by default. */
const TRANSLATED = new Set(Object.entries(ANTHROPIC_CHAT_DEFAULT.features).flatMap(([feature, on]) => (on ? [feature] : [])));

export function messageParams(request: GenerationRequest, model: string): Params {
  // The router sends only what the deployment declares; a catalog that declares more than this translates is a
  // misconfiguration, refused here rather than sent without the parameter.
  const untranslated = featuresUsed(request).find((use) => !TRANSLATED.has(use.feature));
  if (untranslated) throw notTranslatable(`${untranslated.param} has no Anthropic equivalent`);
  const system = request.messages.filter(isInstruction).map((m) => ({ type: 'text' as const, text: contentText(m.content) }));
  const user = endUser(request);
  return {
    model,
    max_tokens: request.maxTokens,
    messages: turns(request.messages),
    // One text block per system message, in order: the API's own way to give several, no separator of ours.
    ...(system.length > 0 ? { system } : {}),
    ...(request.stop.length > 0 ? { stop_sequences: request.stop } : {}),
    ...tooling(request),
    ...(request.responseFormat?.type === 'json_schema' ? { output_config: { format: { type: 'json_schema', schema: schemaOf(request.responseFormat) } } } : {}),
    ...(user !== undefined ? { metadata: { user_id: user } } : {}),
    thinking: thinkingOff,
  };
}

/**
 * Haiku 5.5 thinks by default and its thinking counts toward max_tokens, so a customer's max_tokens would no longer
 * bound the answer they see (https://platform.claude.com/docs/en/build-with-claude/prompt-engineering/prompting-claude-haiku-5-5).
 * Models that always think (Opus 5.5, the Fable models) answer 400 to this. With thinking off, `tool_choice` `any`
 * and `tool` are allowed too (extended thinking takes only `auto` and `none`).
 */
const thinkingOff = { type: 'disabled' } as const;

/**
 * The conversation as Anthropic's turns. Consecutive same-role turns go as they are: the API combines them into one
 * turn itself (Messages API reference, `messages`); tool results, which OpenAI sends one message each, are gathered
 * into the one user turn that answers the assistant's calls, as the tool-use guide shows them.
 */
function turns(messages: ChatMessage[]): Anthropic.MessageParam[] {
  const out: Anthropic.MessageParam[] = [];
  for (const message of messages) {
    if (message.role === 'user') {
      out.push({ role: 'user', content: typeof message.content === 'string' ? message.content : message.content.map(block) });
    } else if (message.role === 'assistant') {
      out.push({ role: 'assistant', content: assistantContent(message.content, message.tool_calls) });
    } else if (message.role === 'tool') {
      const result: Anthropic.ToolResultBlockParam = { type: 'tool_result', tool_use_id: message.tool_call_id, content: textContent(message.content) };
      const last = out.at(-1);
      if (last?.role === 'user' && Array.isArray(last.content) && last.content.every((b) => b.type === 'tool_result')) last.content.push(result);
      else out.push({ role: 'user', content: [result] });
    }
  }
  return out;
}

function assistantContent(content: string | TextPart[] | null | undefined, calls: ToolCall[] | undefined): Anthropic.MessageParam['content'] {
  if (calls === undefined) return textContent(content ?? '');
  const text = contentText(content);
  // An empty text block is refused by the API; a turn of only tool calls has none.
  return [...(text ? [{ type: 'text' as const, text }] : []), ...calls.map(toolUse)];
}

const textContent = (content: string | TextPart[]) => (typeof content === 'string' ? content : content.map((part) => ({ type: 'text' as const, text: part.text })));

function block(part: ContentPart): Anthropic.TextBlockParam | Anthropic.ImageBlockParam {
  if (part.type === 'text') return { type: 'text', text: part.text };
  // OpenAI's `detail` has no counterpart: Claude sizes every image its own way (docs/providers.md).
  return { type: 'image', source: imageSource(part.image_url.url) };
}

/** The contract admits only https URLs and base64 `data:image/{png,jpeg,gif,webp}` URLs, the four types Claude reads. */
function imageSource(url: string): Anthropic.Base64ImageSource | Anthropic.URLImageSource {
  const data = /^data:(image\/(?:png|jpeg|gif|webp));base64,(.*)$/s.exec(url);
  if (!data) return { type: 'url', url };
  return { type: 'base64', media_type: data[1] as Anthropic.Base64ImageSource['media_type'], data: data[2]! };
}

/** Anthropic takes a call's input as a JSON object, where OpenAI carries the arguments as the text the model wrote. */
function toolUse(call: ToolCall): Anthropic.ToolUseBlockParam {
  const text = call.function.arguments;
  // A call without arguments: some clients send "" where the model wrote "{}".
  if (text.trim() === '') return { type: 'tool_use', id: call.id, name: call.function.name, input: {} };
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch {
    throw notTranslatable(`the arguments of tool call ${call.id} are not JSON`);
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw notTranslatable(`the arguments of tool call ${call.id} are not a JSON object`);
  return { type: 'tool_use', id: call.id, name: call.function.name, input };
}

/**
 * Tools, and how they may be called. Without tools `tool_choice` says nothing OpenAI's API would act on (`none` is
 * its default then, and `auto` amounts to it), so it is not sent: Anthropic takes no tool_choice without tools.
 */
function tooling(request: GenerationRequest): Pick<Params, 'tools' | 'tool_choice'> {
  const tools = request.tools ?? [];
  if (tools.length === 0) return {};
  const choice = toolChoice(request);
  return { tools: tools.map(tool), ...(choice ? { tool_choice: choice } : {}) };
}

function tool({ function: f }: FunctionTool): Anthropic.Tool {
  return {
    name: f.name,
    ...(f.description !== undefined ? { description: f.description } : {}),
    // OpenAI: "omitting parameters defines a function with an empty parameter list".
    input_schema: (f.parameters ?? { type: 'object', properties: {} }) as Anthropic.Tool.InputSchema,
    // Strict tool use: inputs guaranteed to follow the schema, as OpenAI's strict function calling
    // (https://platform.claude.com/docs/en/build-with-claude/structured-outputs).
    ...(f.strict === true ? { strict: true } : {}),
  };
}

/** `required` is Anthropic's `any`; at most one call (`parallel_tool_calls: false`) is `disable_parallel_tool_use`. */
function toolChoice({ toolChoice: choice, parallelToolCalls }: GenerationRequest): Anthropic.ToolChoice | undefined {
  const single = parallelToolCalls === false ? { disable_parallel_tool_use: true } : {};
  if (choice === 'none') return { type: 'none' };
  if (choice === 'required') return { type: 'any', ...single };
  if (typeof choice === 'object') return { type: 'tool', name: choice.function.name, ...single };
  if (choice === 'auto' || parallelToolCalls === false) return { type: 'auto', ...single };
  return undefined;
}

function schemaOf(format: Extract<GenerationRequest['responseFormat'], { type: 'json_schema' }>): Record<string, unknown> {
  // Structured outputs need the schema itself; OpenAI's optional `schema` has no Anthropic reading without it.
  if (format.json_schema.schema === undefined) throw notTranslatable('response_format.json_schema.schema is required');
  return format.json_schema.schema;
}

/**
 * `metadata.user_id`: "an external identifier for the user who is associated with the request", for abuse
 * detection: OpenAI's `safety_identifier`, and its older `user`, which it replaces. Two different ones cannot both go.
 */
function endUser({ options }: GenerationRequest): string | undefined {
  const { safety_identifier: safety, user } = options ?? {};
  if (safety !== undefined && user !== undefined && safety !== user) throw notTranslatable('safety_identifier and user differ (Anthropic takes one end-user id)');
  return safety ?? user;
}

/** The request cannot be sent as asked: refused, never sent without what it asked for. */
function notTranslatable(what: string): ProviderError {
  return new ProviderError({ kind: 'request', message: `${PROVIDER} cannot take this request: ${what}.`, detail: `${PROVIDER}: ${what}; the request was not sent` });
}
