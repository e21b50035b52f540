import {
  type ChatMessage,
  type ContentPart,
  type CreateResponse,
  type FunctionTool,
  type ResponseFormat,
  type ToolCall,
  type ToolChoice,
  DomainError,
  type FinishReason,
  ImageUrlSchema,
  invalidRequest,
  type ResponseContentPart,
  type ResponseInputItem,
  type ResponseItem,
  type ResponseObject,
  type ResponseOutputItem,
  type ResponseStreamEvent,
  type ResponseUsage,
  type Usage,
} from '@oc/contracts';

/**
 * The Responses API as a chat completion, the way LiteLLM bridges it: the request's items become chat messages,
 * its fields the chat request's, and the answer (whole, or chunk by chunk) a Response object and its events. Pure:
 * ids and times come in. What the chat completion cannot do is refused here by name, never dropped.
 */

/** A request item, an item reference resolved to the stored item it names. */
export type ConcreteInputItem = Exclude<ResponseInputItem, { type: 'item_reference' }> | { type: 'resolved'; item: ResponseItem };

export const refused = (param: string, why: string) =>
  new DomainError({ kind: 'InvalidState', code: 'unsupported_parameter', message: `'${param}' ${why}; send the request without it.`, param });

/** Fields the chat completion has nothing for, by value: null, and the values that mean what we do anyway, pass. */
function refuseUnserved(body: CreateResponse) {
  const checks: Array<[string, boolean, string]> = [
    ['background', body.background === true, 'is not supported here (responses run while the request waits)'],
    ['truncation', body.truncation === 'disabled', "is not supported here: a conversation longer than the context drops its oldest messages ('auto')"],
    ['service_tier', !['auto', 'default', undefined, null].includes(body.service_tier), 'is not supported here: only the default tier is offered'],
    ['include', (body.include ?? []).length > 0, 'is not supported here: our items have no optional fields'],
    ['stream_options.include_obfuscation', body.stream_options?.include_obfuscation === true, 'is not supported here: events are not padded'],
    ['top_p', body.top_p != null && body.top_p !== 1, 'is not supported here'],
    ['text.verbosity', body.text?.verbosity != null && body.text.verbosity !== 'medium', 'is not supported here'],
    ['tool_choice', typeof body.tool_choice === 'object' && body.tool_choice?.type === 'allowed_tools', "(allowed_tools) is not supported here: send the tools allowed as tools"],
  ];
  const hit = checks.find(([, refuse]) => refuse);
  if (hit) throw refused(hit[0], hit[2]);
}

/** `msg_<response's id>_<n>`: an item's response is found from its id alone (an `item_reference` names only that). */
export const itemId = (responseId: string, prefix: 'msg' | 'fc' | 'fco', index: string) => `${prefix}_${responseId.slice('resp_'.length)}_${index}`;

/** The response an item id of ours belongs to; undefined for an id we never made. */
export function responseOfItem(id: string): string | undefined {
  const match = /^(?:msg|fc|fco)_([A-Za-z0-9]+)_[io]\d+$/.exec(id);
  return match ? `resp_${match[1]}` : undefined;
}

const textOf = (parts: ReadonlyArray<{ text: string }>) => parts.map((p) => p.text).join('\n');

/** The request's items as stored and listed: each with an id of ours (a reference keeps the one it named). */
export function storedInputItems(responseId: string, input: string | ConcreteInputItem[]): ResponseItem[] {
  const items = typeof input === 'string' ? [{ type: 'message' as const, role: 'user' as const, content: input }] : input;
  return items.map((item, i): ResponseItem => {
    const at = `input[${i}]`;
    const own = `i${i}`;
    switch (item.type) {
      case 'resolved':
        return item.item;
      case 'function_call':
        return { type: 'function_call', id: itemId(responseId, 'fc', own), call_id: item.call_id, name: item.name, arguments: item.arguments, status: 'completed' };
      case 'function_call_output': {
        if (typeof item.output === 'string') return { type: 'function_call_output', id: itemId(responseId, 'fco', own), call_id: item.call_id, output: item.output, status: 'completed' };
        const output = item.output.map((part, j) => {
          if (part.type === 'input_text') return part;
          throw refused(`${at}.output[${j}]`, `(${part.type}) is not supported here: a tool's output is text`);
        });
        return { type: 'function_call_output', id: itemId(responseId, 'fco', own), call_id: item.call_id, output, status: 'completed' };
      }
      case undefined:
      case 'message': {
        if (item.phase != null) throw refused(`${at}.phase`, 'is not supported here');
        const parts = typeof item.content === 'string' ? [{ type: 'input_text' as const, text: item.content }] : item.content;
        if (item.role === 'user') {
          return { type: 'message', id: itemId(responseId, 'msg', own), role: 'user', status: 'completed', content: parts.map((part, j) => userPart(part, `${at}.content[${j}]`)) };
        }
        const texts = parts.map((part, j) => {
          if (part.type === 'input_text' || part.type === 'output_text') return { text: part.text };
          throw refused(`${at}.content[${j}]`, `(${part.type}) is not supported here: only a user message takes images`);
        });
        if (item.role === 'assistant') {
          return {
            type: 'message',
            id: itemId(responseId, 'msg', own),
            role: 'assistant',
            status: 'completed',
            content: texts.map(({ text }) => ({ type: 'output_text', text, annotations: [] })),
          };
        }
        return {
          type: 'message',
          id: itemId(responseId, 'msg', own),
          role: item.role,
          status: 'completed',
          content: texts.map(({ text }) => ({ type: 'input_text', text })),
        };
      }
      default: {
        const never: never = item;
        return never;
      }
    }
  });
}

type InputPart = Extract<ResponseItem, { type: 'message'; role: 'user' | 'system' | 'developer' }>['content'][number];

/** A user message's part: text, or an image as chat takes it (an https or data: URL; no uploaded files here). */
function userPart(part: ResponseContentPart, at: string): InputPart {
  if (part.type === 'input_text' || part.type === 'output_text') return { type: 'input_text', text: part.text };
  if (part.type !== 'input_image') throw refused(at, `(${part.type}) is not supported here: files are not taken`);
  if (part.file_id != null) throw refused(`${at}.file_id`, 'is not supported here: send the image as image_url');
  if (part.detail === 'original') throw refused(`${at}.detail`, "'original' is not supported here: use low, high or auto");
  if (part.image_url == null) throw invalidRequest('invalid_value', `Missing '${at}.image_url'.`, `${at}.image_url`);
  if (!ImageUrlSchema.safeParse(part.image_url).success) {
    throw invalidRequest('invalid_value', `Invalid '${at}.image_url': an https URL or a data:image/{png,jpeg,gif,webp};base64 URL.`, `${at}.image_url`);
  }
  return { type: 'input_image', image_url: part.image_url, ...(part.detail ? { detail: part.detail } : {}) };
}

/** A message's parts in chat's terms: text alone stays a string, as before images were taken. */
function chatContent(parts: ReadonlyArray<{ type: string; text?: string; image_url?: string | null; detail?: string }>): string | ContentPart[] {
  if (!parts.some((part) => part.type === 'input_image')) return textOf(parts.map((part) => ({ text: part.text ?? '' })));
  return parts.map((part): ContentPart =>
    part.type === 'input_image'
      ? { type: 'image_url', image_url: { url: part.image_url!, ...(part.detail ? { detail: part.detail as 'auto' | 'low' | 'high' } : {}) } }
      : { type: 'text', text: part.text ?? '' },
  );
}

/**
 * Items as the chat completion's messages (OpenAI's developer role is a system message to chat): function calls
 * join the assistant turn before them as its tool calls, a call's output is a tool message.
 */
export function chatMessages(items: ResponseItem[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  for (const item of items) {
    if (item.type === 'function_call') {
      const call: ToolCall = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
      const last = messages.at(-1);
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (item.type === 'function_call_output') {
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: typeof item.output === 'string' ? item.output : textOf(item.output as Array<{ text: string }>) });
    } else {
      const content = item.role === 'assistant' ? textOf(item.content.map((part) => ('text' in part ? part : { text: '' }))) : chatContent(item.content);
      messages.push({ role: item.role === 'developer' ? 'system' : item.role, content } as ChatMessage);
    }
  }
  return messages;
}

/** The chat completion a response runs, in chat's terms (its conversation and session come from the service). */
export interface ChatPlan {
  messages: ChatMessage[];
  maxTokens: number | undefined;
  temperature: number | undefined;
  instructions: string | undefined;
  store: boolean;
  /** The chat request's own fields, in its names, present only when the response's request set them. */
  fields: { tools?: FunctionTool[]; tool_choice?: ToolChoice; parallel_tool_calls?: boolean; response_format?: ResponseFormat };
}

/** Refuses what cannot be served, and says what the chat completion is asked for. */
export function planChat(body: CreateResponse, inputItems: ResponseItem[]): ChatPlan {
  refuseUnserved(body);
  const choice = body.tool_choice;
  const format = body.text?.format;
  return {
    messages: chatMessages(inputItems),
    maxTokens: body.max_output_tokens ?? undefined,
    temperature: body.temperature ?? undefined,
    instructions: body.instructions ?? undefined,
    store: body.store !== false,
    fields: {
      ...(body.tools?.length
        ? {
            tools: body.tools.map(({ name, description, parameters, strict }) => ({
              type: 'function' as const,
              function: { name, ...(description != null ? { description } : {}), ...(parameters != null ? { parameters } : {}), ...(strict != null ? { strict } : {}) },
            })),
          }
        : {}),
      ...(typeof choice === 'string' ? { tool_choice: choice } : choice?.type === 'function' ? { tool_choice: { type: 'function' as const, function: { name: choice.name } } } : {}),
      ...(body.parallel_tool_calls != null ? { parallel_tool_calls: body.parallel_tool_calls } : {}),
      ...(format?.type === 'json_object' ? { response_format: { type: 'json_object' as const } } : {}),
      ...(format?.type === 'json_schema'
        ? {
            response_format: {
              type: 'json_schema' as const,
              json_schema: {
                name: format.name,
                schema: format.schema,
                ...(format.description !== undefined ? { description: format.description } : {}),
                ...(format.strict != null ? { strict: format.strict } : {}),
              },
            },
          }
        : {}),
    },
  };
}

/** The response as it starts: every field the request decides, nothing generated yet. */
export function draftResponse(body: CreateResponse, id: string, createdAt: number): ResponseObject {
  return {
    id,
    object: 'response',
    created_at: createdAt,
    completed_at: null,
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    model: body.model,
    output: [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: body.store !== false,
    temperature: body.temperature ?? 1,
    text: { format: body.text?.format ?? { type: 'text' }, verbosity: 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'auto',
    usage: null,
    user: body.user ?? null,
    safety_identifier: body.safety_identifier ?? null,
  };
}

export const responseUsage = (usage: Usage): ResponseUsage => ({
  input_tokens: usage.prompt_tokens,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: usage.completion_tokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: usage.total_tokens,
});

/** Chat's finish reasons that leave a response incomplete, and why in the Responses API's words. */
const INCOMPLETE_BECAUSE: Partial<Record<string, 'max_output_tokens' | 'content_filter'>> = { length: 'max_output_tokens', content_filter: 'content_filter' };

type Event = ResponseStreamEvent;
type Unnumbered<E> = E extends unknown ? Omit<E, 'sequence_number'> : never;

/**
 * Builds a response from the chat completion's answer as it comes, with the Responses events that tell a client of
 * each step: `response.created` and `.in_progress` first, an output item opened at its first text or tool call, its
 * deltas, then each item closed and `response.completed` (or `.incomplete`, or `.failed`). A whole answer is fed the
 * same way, its events unused, so that a stored response is the same streamed or not.
 */
export class ResponseBuilder {
  private sequence = 0;
  private readonly response: ResponseObject;
  private message: { index: number; id: string; text: string } | undefined;
  /** The function calls opened, by their position among the answer's tool calls. */
  private readonly calls = new Map<number, { index: number; id: string; callId: string; name: string; arguments: string }>();
  private finishReason: FinishReason = 'stop';

  constructor(draft: ResponseObject) {
    this.response = structuredClone(draft);
  }

  start(): Event[] {
    return this.number([
      { type: 'response.created', response: this.snapshot() },
      { type: 'response.in_progress', response: this.snapshot() },
    ]);
  }

  text(delta: string): Event[] {
    if (delta === '') return [];
    const opened = this.message ? [] : this.openMessage();
    const message = this.message!;
    message.text += delta;
    return this.number([
      ...opened,
      { type: 'response.output_text.delta', item_id: message.id, output_index: message.index, content_index: 0, delta, logprobs: [] },
    ]);
  }

  /** A fragment of the answer's tool call number `call`: its first names it (chat's `id` is the call's `call_id`). */
  toolCall(call: number, fragment: { id?: string | undefined; name?: string | undefined; arguments?: string | undefined }): Event[] {
    let opened: Array<Unnumbered<Event>> = [];
    let open = this.calls.get(call);
    if (!open) {
      const index = this.response.output.length;
      open = { index, id: itemId(this.response.id, 'fc', `o${index}`), callId: fragment.id ?? '', name: fragment.name ?? '', arguments: '' };
      this.calls.set(call, open);
      const item: ResponseOutputItem = { type: 'function_call', id: open.id, call_id: open.callId, name: open.name, arguments: '', status: 'in_progress' };
      this.response.output.push(item);
      opened = [{ type: 'response.output_item.added', output_index: index, item: structuredClone(item) }];
    }
    const delta = fragment.arguments ?? '';
    open.arguments += delta;
    return this.number([
      ...opened,
      ...(delta === '' ? [] : [{ type: 'response.function_call_arguments.delta' as const, item_id: open.id, output_index: open.index, delta }]),
    ]);
  }

  finish(reason: FinishReason): void {
    this.finishReason = reason;
  }

  /** Closes the output with the usage charged: the events that end the stream, and the response to store. */
  complete(usage: Usage, completedAt: number): { events: Event[]; response: ResponseObject } {
    // An answer with neither text nor tool calls is still a message, as OpenAI's is.
    const opened = this.message || this.calls.size > 0 ? [] : this.openMessage();
    const reason = INCOMPLETE_BECAUSE[this.finishReason];
    const incomplete = reason !== undefined;
    const closed = this.closeAll(incomplete ? 'incomplete' : 'completed');
    Object.assign(this.response, {
      status: incomplete ? 'incomplete' : 'completed',
      completed_at: completedAt,
      incomplete_details: incomplete ? { reason } : null,
      usage: responseUsage(usage),
    });
    const done = { type: incomplete ? ('response.incomplete' as const) : ('response.completed' as const), response: this.snapshot() };
    return { events: this.number([...opened, ...closed, done]), response: this.snapshot() };
  }

  /** The answer failed midway: what was generated so far is in the failed response. */
  fail(error: { code: string; message: string }): Event[] {
    const closed = this.closeAll('incomplete');
    Object.assign(this.response, { status: 'failed', error: { code: error.code === 'rate_limit_exceeded' ? error.code : 'server_error', message: error.message } });
    return this.number([...closed, { type: 'response.failed', response: this.snapshot() }]);
  }

  private openMessage(): Array<Unnumbered<Event>> {
    const index = this.response.output.length;
    const id = itemId(this.response.id, 'msg', `o${index}`);
    this.message = { index, id, text: '' };
    const item: ResponseOutputItem = { type: 'message', id, role: 'assistant', status: 'in_progress', content: [] };
    this.response.output.push(item);
    return [
      { type: 'response.output_item.added', output_index: index, item: structuredClone(item) },
      { type: 'response.content_part.added', item_id: id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
    ];
  }

  /** Closes the open items in the order they were opened. */
  private closeAll(status: 'completed' | 'incomplete'): Array<Unnumbered<Event>> {
    const closing: Array<[number, () => Array<Unnumbered<Event>>]> = [
      ...(this.message ? [[this.message.index, () => this.closeMessage(status)] as [number, () => Array<Unnumbered<Event>>]] : []),
      ...[...this.calls.values()].map((call): [number, () => Array<Unnumbered<Event>>] => [call.index, () => this.closeCall(call, status)]),
    ];
    this.calls.clear();
    return closing.sort(([a], [b]) => a - b).flatMap(([, close]) => close());
  }

  private closeMessage(status: 'completed' | 'incomplete'): Array<Unnumbered<Event>> {
    const message = this.message!;
    const part = { type: 'output_text' as const, text: message.text, annotations: [] };
    const item: ResponseOutputItem = { type: 'message', id: message.id, role: 'assistant', status, content: [part] };
    this.response.output[message.index] = item;
    this.message = undefined;
    const at = { item_id: message.id, output_index: message.index, content_index: 0 };
    return [
      { type: 'response.output_text.done', ...at, text: message.text, logprobs: [] },
      { type: 'response.content_part.done', ...at, part },
      { type: 'response.output_item.done', output_index: message.index, item: structuredClone(item) },
    ];
  }

  private closeCall(call: { index: number; id: string; callId: string; name: string; arguments: string }, status: 'completed' | 'incomplete'): Array<Unnumbered<Event>> {
    const item: ResponseOutputItem = { type: 'function_call', id: call.id, call_id: call.callId, name: call.name, arguments: call.arguments, status };
    this.response.output[call.index] = item;
    return [
      { type: 'response.function_call_arguments.done', item_id: call.id, output_index: call.index, name: call.name, arguments: call.arguments },
      { type: 'response.output_item.done', output_index: call.index, item: structuredClone(item) },
    ];
  }

  private snapshot(): ResponseObject {
    return structuredClone(this.response);
  }

  private number(events: Array<Unnumbered<Event>>): Event[] {
    return events.map((event) => ({ ...event, sequence_number: this.sequence++ }) as Event);
  }
}
