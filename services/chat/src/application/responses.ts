import {
  type ChatCompletion,
  type ChatCompletionChunk,
  ChatMessages,
  type Clock,
  type IdSource,
  notFound,
  parseOrThrow,
  type ResponseItem,
  type ResponseMessageOf,
  type ResponseObject,
  StreamFrameSchema,
  type StreamFrame,
  unixSeconds,
} from '@oc/contracts';
import { aggregateStream, type CommandHandler, type EventStore } from '@oc/eventstore';
import type { ReadModels } from '@oc/readmodel';
import { setActiveSpanAttributes } from '@oc/telemetry';
import { conversationUpTo, responseDecider, responseTurns } from '../domain/response-log';
import {
  chatMessages,
  type ConcreteInputItem,
  draftResponse,
  planChat,
  ResponseBuilder,
  responseOfItem,
  storedInputItems,
} from '../domain/responses';
import { sessionStream } from '../domain/session';
import { ChatCollections, type ChatResponseDoc } from '../projections/documents';
import type { ChatService } from './chat';
import { FrameSequence } from './frames';
import type { FramePublisher } from './ports';

export interface ResponsesDeps {
  chat: ChatService;
  eventStore: EventStore;
  /** The chat service's own, so that a read through `readModels` sees what was just recorded. */
  commands: CommandHandler;
  readModels: ReadModels;
  frames: FramePublisher;
  clock: Clock;
  ids: IdSource;
}

/** The response a request is about, on its span, so that its traces are found by its id. */
const onSpan = (orgId: string, responseId: string) => setActiveSpanAttributes({ 'oc.response.id': responseId, 'oc.organization.id': orgId });

/**
 * OpenAI's Responses API on the chat completion: each response is one chat completion (reserved, generated and
 * charged exactly as chat's), its answer translated to a Response (domain/responses.ts). A stored response is
 * recorded in the chat session it belongs to: a new one for a first response, the previous response's for one that
 * continues it, whose conversation is the chain of responses it continues (not whatever else the session holds).
 */
export class ResponsesService {
  constructor(private readonly deps: ResponsesDeps) {}

  private get responses() {
    return this.deps.readModels.collection<ChatResponseDoc>(ChatCollections.responses);
  }

  /** `watchTo`: the request's own subject when it is answered whole (`WATCH_TO_HEADER`). */
  async create(m: ResponseMessageOf<'create'>, watchTo?: string): Promise<ResponseObject | { id: string; stream_to: string }> {
    const now = this.deps.clock.now();
    const id = this.deps.ids.next('resp_');
    onSpan(m.org_id, id);
    const previous = m.previous_response_id ? await this.stored(m.org_id, m.previous_response_id, 'previous_response_id') : undefined;
    const inputItems = storedInputItems(id, await this.resolveReferences(m.org_id, m.input));
    const plan = planChat(m, inputItems);
    const draft = draftResponse(m, id, unixSeconds(now));
    const history = previous ? chatMessages(await this.conversationUpTo(previous)) : [];
    const request = parseOrThrow(ChatMessages.createChatCompletion, {
      model: m.model,
      messages: plan.messages,
      stream: m.stream_to !== undefined,
      ...(plan.maxTokens !== undefined ? { max_tokens: plan.maxTokens } : {}),
      ...(plan.temperature !== undefined ? { temperature: plan.temperature } : {}),
      ...plan.fields,
      ...(previous ? { session_id: previous.session_id } : {}),
      ...(m.stream_to !== undefined ? { stream_to: m.stream_to } : {}),
      org_id: m.org_id,
      mode: m.mode,
      ...(m.key_id !== undefined ? { key_id: m.key_id } : {}),
    });
    const via = { history, ...(plan.instructions !== undefined ? { instructions: plan.instructions } : {}), keep: plan.store };
    const record = (completionId: string, sessionId: string, response: ResponseObject) =>
      plan.store ? this.record(m.org_id, sessionId, completionId, response, inputItems) : Promise.resolve();

    if (m.stream_to === undefined) {
      const completion = (await this.deps.chat.createChatCompletion(request, { ...via, ...(watchTo !== undefined ? { watchTo } : {}) })) as ChatCompletion;
      const builder = new ResponseBuilder(draft);
      const choice = completion.choices[0]!;
      builder.text(choice.message.content ?? '');
      for (const [call, { id: callId, function: fn }] of (choice.message.tool_calls ?? []).entries()) builder.toolCall(call, { id: callId, ...fn });
      builder.finish(choice.finish_reason);
      const { response } = builder.complete(completion.usage, unixSeconds(this.deps.clock.now()));
      await record(completion.id, completion.session_id, response);
      return response;
    }

    const frames = this.translated(m.stream_to, new ResponseBuilder(draft), record);
    const accepted = await this.deps.chat.createChatCompletion(request, { ...via, frames });
    return { id, stream_to: (accepted as { stream_to: string }).stream_to };
  }

  async get(m: ResponseMessageOf<'get'>): Promise<ResponseObject> {
    onSpan(m.org_id, m.response_id);
    return (await this.stored(m.org_id, m.response_id)).response;
  }

  async delete(m: ResponseMessageOf<'delete'>) {
    onSpan(m.org_id, m.response_id);
    const doc = await this.stored(m.org_id, m.response_id);
    const command = { type: 'DeleteResponse' as const, sessionId: doc.session_id, orgId: m.org_id, responseId: doc._id, now: unixSeconds(this.deps.clock.now()) };
    await this.deps.commands.handle(sessionStream(doc.session_id), responseDecider, command);
    return { id: doc._id, object: 'response.deleted' as const, deleted: true as const };
  }

  /** OpenAI's list of a response's input items: newest first unless `order: asc`, after the item `after` names. */
  async listInputItems(m: ResponseMessageOf<'listInputItems'>) {
    onSpan(m.org_id, m.response_id);
    const doc = await this.stored(m.org_id, m.response_id);
    const items = m.order === 'desc' ? [...doc.input_items].reverse() : doc.input_items;
    const start = m.after === undefined ? 0 : items.findIndex((item) => item.id === m.after) + 1;
    if (start === 0 && m.after !== undefined) {
      throw notFound('invalid_cursor', `No input item with id '${m.after}' in this response.`, 'after');
    }
    const data = items.slice(start, start + m.limit);
    return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: start + m.limit < items.length };
  }

  /** The organization's stored response; another organization's, or a deleted one, is answered like a missing one. */
  private async stored(orgId: string, responseId: string, param?: string): Promise<ChatResponseDoc> {
    const doc = await this.responses.findOne({ _id: responseId, org_id: orgId });
    if (doc) return doc;
    throw notFound('resource_not_found', `No response found with id '${responseId}'.`, param);
  }

  /** Every `item_reference` as the stored item it names (an item of a response of this organization), or 404. */
  private async resolveReferences(orgId: string, input: ResponseMessageOf<'create'>['input']): Promise<string | ConcreteInputItem[]> {
    if (typeof input === 'string') return input;
    return Promise.all(
      input.map(async (item, i): Promise<ConcreteInputItem> => {
        if (item.type !== 'item_reference') return item;
        const owner = responseOfItem(item.id);
        const doc = owner === undefined ? undefined : await this.responses.findOne({ _id: owner, org_id: orgId });
        const found = doc && [...doc.input_items, ...doc.response.output].find((stored) => stored.id === item.id);
        if (!found) {
          throw notFound('resource_not_found', `No stored item found with id '${item.id}'.`, `input[${i}].id`);
        }
        return { type: 'resolved', item: found };
      }),
    );
  }

  private async conversationUpTo(previous: ChatResponseDoc): Promise<ResponseItem[]> {
    const { state } = await aggregateStream(this.deps.eventStore, sessionStream(previous.session_id), responseTurns);
    return conversationUpTo(state, previous._id);
  }

  private async record(orgId: string, sessionId: string, completionId: string, response: ResponseObject, inputItems: ResponseItem[]) {
    const command = { type: 'RecordResponse' as const, sessionId, orgId, completionId, response, inputItems };
    await this.deps.commands.handle(sessionStream(sessionId), responseDecider, command);
  }

  /**
   * The frames the chat completion publishes for its stream, translated into Responses events on the same subject
   * (numbered afresh): its chunks into output events; its end, once the response is recorded, into the events that
   * close the response, then an end of our own; its error into `response.failed` and the error.
   */
  private translated(
    streamTo: string,
    builder: ResponseBuilder,
    record: (completionId: string, sessionId: string, response: ResponseObject) => Promise<void>,
  ): FramePublisher {
    const out = new FrameSequence(this.deps.frames, streamTo);
    let started = false;
    let chunk: ChatCompletionChunk | undefined;
    const send = async (events: unknown[]) => {
      for (const event of events) await out.data(event);
    };
    return {
      publish: async (_subject, payload) => {
        const frame: StreamFrame = StreamFrameSchema.parse(payload);
        const starting = started ? [] : builder.start();
        started = true;
        if (frame.kind === 'data') {
          chunk = frame.data as ChatCompletionChunk;
          const choice = chunk.choices[0];
          if (choice?.finish_reason) builder.finish(choice.finish_reason);
          const calls = (choice?.delta.tool_calls ?? []).flatMap((call) => builder.toolCall(call.index, { id: call.id, ...call.function }));
          return send([...starting, ...builder.text(choice?.delta.content ?? ''), ...calls]);
        }
        if (frame.kind === 'end') {
          const { events, response } = builder.complete(frame.usage, unixSeconds(this.deps.clock.now()));
          await record(chunk!.id, chunk!.session_id, response);
          await send([...starting, ...events]);
          return out.end(frame.usage);
        }
        await send([...starting, ...builder.fail(frame.error)]);
        return out.error(frame.error);
      },
    };
  }
}
