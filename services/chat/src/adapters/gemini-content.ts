import { type Content, FunctionCallingConfigMode, type GenerateContentConfig, type Part } from '@google/genai';
import { type ChatMessage, type ContentPart, contentText, type FunctionTool, isInstruction } from '@oc/contracts';
import { ProviderError } from '@oc/routing';
import type { GenerationRequest } from '../application/ports';
import { featuresUsed } from '../domain/features';
import { GEMINI_CHAT_DEFAULT } from './provider-defaults';

/**
 * OpenAI's Chat Completions request as Gemini's generateContent takes it (ai.google.dev/api/generate-content): the
 * translation only, no calls.
 */

const PROVIDER = 'Gemini';

/** What this translation honours: exactly what a Gemini deployment declares by default. */
const TRANSLATED = new Set(Object.entries(GEMINI_CHAT_DEFAULT.features).flatMap(([feature, on]) => (on ? [feature] : [])));

/**
 * Google's documented stand-in for the thought signature of a function call Gemini did not just make (OpenAI's
 * tool calls carry none back): "skip_thought_signature_validator", accepted by the Gemini API and Vertex AI alike
 * (ai.google.dev/gemini-api/docs/thought-signatures#faqs). Gemini 3 answers 400 to a model turn whose first function
 * call has no signature.
 */
const NO_SIGNATURE = 'skip_thought_signature_validator';

/** The request's own settings, beside what the adapter adds (thinking, abort signal, transport). */
export function requestSettings(request: GenerationRequest): GenerateContentConfig {
  // The router sends only what the deployment declares; a catalog that declares more than this translates is a
  // misconfiguration, refused here rather than sent without the parameter.
  const untranslated = featuresUsed(request).find((use) => !TRANSLATED.has(use.feature));
  if (untranslated) throw notTranslatable(`${untranslated.param} has no Gemini equivalent here`);
  const system = request.messages.filter(isInstruction);
  const format = request.responseFormat;
  return {
    ...(system.length > 0 ? { systemInstruction: { parts: system.map((message) => ({ text: contentText(message.content) })) } } : {}),
    maxOutputTokens: request.maxTokens,
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.options?.top_p !== undefined ? { topP: request.options.top_p } : {}),
    ...(request.stop.length > 0 ? { stopSequences: request.stop } : {}),
    ...((request.n ?? 1) > 1 ? { candidateCount: request.n } : {}),
    ...(request.seed !== undefined ? { seed: request.seed } : {}),
    // JSON mode, and with a schema Gemini's structured output; `responseJsonSchema` takes JSON Schema as it is,
    // where `responseSchema` takes Google's OpenAPI subset (the SDK's GenerateContentConfig).
    ...(format ? { responseMimeType: 'application/json' } : {}),
    ...(format?.type === 'json_schema' ? { responseJsonSchema: schemaOf(format) } : {}),
    ...tooling(request),
  };
}

/**
 * The conversation as Gemini's turns: `assistant` is `model`, tool calls are `functionCall` parts and tool results
 * `functionResponse` parts of a user turn; system messages go to `systemInstruction` instead. Adjacent turns of one
 * role are merged, since generateContent refuses turns that do not alternate (400 "Please ensure that multiturn
 * requests alternate between user and model", github.com/NousResearch/hermes-agent/issues/55125).
 */
export function turns(messages: ChatMessage[]): Content[] {
  const names = new Map<string, string>();
  const contents: Array<{ role: 'user' | 'model'; parts: Part[] }> = [];
  const add = (role: 'user' | 'model', parts: Part[]) => {
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const message of messages) {
    if (message.role === 'user') {
      add('user', typeof message.content === 'string' ? [{ text: message.content }] : message.content.map(part));
    } else if (message.role === 'assistant') {
      const text = contentText(message.content);
      const calls = (message.tool_calls ?? []).map((call, i): Part => {
        names.set(call.id, call.function.name);
        return { functionCall: { id: call.id, name: call.function.name, args: args(call.id, call.function.arguments) }, ...(i === 0 ? { thoughtSignature: NO_SIGNATURE } : {}) };
      });
      add('model', [...(text || calls.length === 0 ? [{ text }] : []), ...calls]);
    } else if (message.role === 'tool') {
      // Gemini matches a response to its call by name (and id): the name is the call's, from earlier in the conversation.
      const name = names.get(message.tool_call_id);
      if (name === undefined) throw notTranslatable(`no earlier tool call has the id of tool message ${message.tool_call_id}`);
      // "Use "output" key to specify function output" (FunctionResponse.response).
      add('user', [{ functionResponse: { id: message.tool_call_id, name, response: { output: contentText(message.content) } } }]);
    }
  }
  return contents;
}

/** Images come only as data URLs here (`image_url` is not declared): Gemini reads PNG, JPEG and WebP inline. */
function part(content: ContentPart): Part {
  if (content.type === 'text') return { text: content.text };
  const data = /^data:(image\/[a-z]+);base64,(.*)$/s.exec(content.image_url.url);
  if (!data) throw notTranslatable('an image given by URL needs its MIME type, which Gemini requires');
  // OpenAI's `detail` has no counterpart sent: Gemini sizes images itself (docs/providers.md).
  return { inlineData: { mimeType: data[1]!, data: data[2]! } };
}

/** Gemini takes a call's arguments as a JSON object, where OpenAI carries them as the text the model wrote. */
function args(id: string, text: string): Record<string, unknown> {
  // A call without arguments: some clients send "" where the model wrote "{}".
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw notTranslatable(`the arguments of tool call ${id} are not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw notTranslatable(`the arguments of tool call ${id} are not a JSON object`);
  return value as Record<string, unknown>;
}

function tooling(request: GenerationRequest): Pick<GenerateContentConfig, 'tools' | 'toolConfig'> {
  const tools = request.tools ?? [];
  if (tools.length === 0) return {};
  const calling = functionCalling(request, tools);
  return { tools: [{ functionDeclarations: tools.map(declaration) }], ...(calling ? { toolConfig: { functionCallingConfig: calling } } : {}) };
}

/** `parametersJsonSchema` takes the JSON Schema as OpenAI has it; `parameters` would need Google's OpenAPI subset. */
function declaration({ function: f }: FunctionTool) {
  return { name: f.name, ...(f.description !== undefined ? { description: f.description } : {}), ...(f.parameters !== undefined ? { parametersJsonSchema: f.parameters } : {}) };
}

/**
 * tool_choice as Gemini's function-calling mode: `none` NONE, `auto` AUTO, `required` ANY, a named function ANY
 * limited to it. OpenAI's `strict` (arguments that follow the schema) is what ANY and VALIDATED (a preview mode)
 * guarantee by constrained decoding, AUTO does not (ai.google.dev/gemini-api/docs/function-calling, function
 * calling modes), so strict tools the model may or may not call go with VALIDATED.
 */
function functionCalling({ toolChoice: choice }: GenerationRequest, tools: FunctionTool[]) {
  if (choice === 'none') return { mode: FunctionCallingConfigMode.NONE };
  if (choice === 'required') return { mode: FunctionCallingConfigMode.ANY };
  if (typeof choice === 'object') return { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: [choice.function.name] };
  if (tools.some((t) => t.function.strict === true)) return { mode: FunctionCallingConfigMode.VALIDATED };
  return choice === 'auto' ? { mode: FunctionCallingConfigMode.AUTO } : undefined;
}

function schemaOf(format: Extract<GenerationRequest['responseFormat'], { type: 'json_schema' }>): Record<string, unknown> {
  if (format.json_schema.schema === undefined) throw notTranslatable('response_format.json_schema.schema is required');
  return format.json_schema.schema;
}

/** The request cannot be sent as asked: refused, never sent without what it asked for. */
function notTranslatable(what: string): ProviderError {
  return new ProviderError({ kind: 'request', message: `${PROVIDER} cannot take this request: ${what}.`, detail: `${PROVIDER}: ${what}; the request was not sent` });
}
