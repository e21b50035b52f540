import {
  CreateResponseBody,
  DeletedResponseSchema,
  ListInputItemsQuery,
  parseCreateResponse,
  parseResponsesInput,
  ResponseItemListSchema,
  ResponseObjectSchema,
  RetrieveResponseQuery,
  Subjects,
} from '@oc/contracts';
import type { Complete, SseFormat } from './chat-routes';
import type { Route } from './routes';

/**
 * The Responses API's stream: each event named by its type (`event: response.output_text.delta`), nothing after
 * the last. A failure the chat service did not turn into events itself (a stalled stream) is an `error` event
 * numbered after the last event written.
 */
const responseEvents = (): SseFormat => {
  let next = 0;
  return {
    data(data) {
      if (typeof data.sequence_number === 'number') next = data.sequence_number + 1;
      return `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`;
    },
    done: undefined,
    error: ({ message, code, param }) =>
      `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param: param ?? null, sequence_number: next })}\n\n`,
  };
};

/** OpenAI's Responses API, served by the chat service on its sessions and billed per token like chat. */
export function responsesRoutes(complete: Complete): Route[] {
  return [
    {
      method: 'POST',
      path: '/v1/responses',
      scope: 'chat:write',
      chat: true,
      model: true,
      doc: {
        summary: "Create a model response (OpenAI's Responses API; Server-Sent Events with stream: true)",
        // 404: a previous_response_id or item_reference that names no response of the organization.
        errors: [402, 404],
        request: CreateResponseBody,
        response: ResponseObjectSchema,
        media: ['text/event-stream'],
      },
      handle: (ctx) => {
        const body = parseCreateResponse(ctx.body);
        return complete(ctx, Subjects.chat.createResponse, { ...body, stream: body.stream === true }, responseEvents);
      },
    },
    {
      method: 'GET',
      path: '/v1/responses/:id',
      scope: 'chat:read',
      chat: true,
      doc: { summary: 'Retrieve a stored response', query: RetrieveResponseQuery, response: ResponseObjectSchema },
      handle: ({ services, principal, params, query: q, headers }) => {
        parseResponsesInput(RetrieveResponseQuery, q);
        return services.request(Subjects.chat.getResponse, { org_id: principal.org_id, response_id: params.id }, { headers });
      },
    },
    {
      method: 'DELETE',
      path: '/v1/responses/:id',
      scope: 'chat:write',
      chat: true,
      doc: { summary: 'Delete a stored response', response: DeletedResponseSchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(Subjects.chat.deleteResponse, { org_id: principal.org_id, response_id: params.id }, { headers }),
    },
    {
      method: 'GET',
      path: '/v1/responses/:id/input_items',
      scope: 'chat:read',
      chat: true,
      doc: { summary: "A stored response's input items, newest first unless order=asc", query: ListInputItemsQuery, response: ResponseItemListSchema },
      handle: ({ services, principal, params, query: q, headers }) =>
        services.request(Subjects.chat.listResponseInputItems, { ...parseResponsesInput(ListInputItemsQuery, q), org_id: principal.org_id, response_id: params.id }, { headers }),
    },
  ];
}
