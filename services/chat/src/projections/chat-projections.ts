import type { ChatEvent, Metadata, ResponseEvent, StoredChatMessage } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { documentProjection } from '@oc/readmodel';
import { ChatCollections, type ChatResponseDoc, type ChatSessionDoc } from './documents';

type Stored = StoredEvent & ChatEvent;

/** Sessions with their messages, for GET /v1/chat/completions and /v1/chat/completions/{id}. */
export const sessionsProjection = documentProjection<ChatSessionDoc>({
  name: 'chat-sessions',
  collection: ChatCollections.sessions,
  canHandle: ['ChatSessionStarted', 'ChatExchangeRecorded'],
  documentId: (event) => (event.data as { session_id: string }).session_id,
  startedBy: ['ChatSessionStarted'],
  evolve(doc, stored) {
    const event = stored as Stored;
    switch (event.type) {
      case 'ChatSessionStarted':
        return { _id: event.data.session_id, org_id: event.data.org_id, created_at: event.data.created_at, messages: [] };
      case 'ChatExchangeRecorded':
        return doc && { ...doc, messages: [...doc.messages, ...withMetadata(event.data.messages, event.data.metadata)] };
      default:
        return doc;
    }
  },
});

/** The request's metadata goes on the exchange's answer, its last message, where a read of the session shows it. */
const withMetadata = (messages: StoredChatMessage[], metadata: Metadata | undefined) =>
  metadata === undefined || messages.length === 0 ? messages : [...messages.slice(0, -1), { ...messages.at(-1)!, metadata }];

/** Stored responses, for GET and DELETE /v1/responses/{id}, its input items, and `previous_response_id`; deleted ones go. */
export const responsesProjection = documentProjection<ChatResponseDoc>({
  name: 'chat-responses',
  collection: ChatCollections.responses,
  canHandle: ['ResponseRecorded', 'ResponseDeleted'],
  documentId: (stored) => {
    const event = stored as StoredEvent & ResponseEvent;
    return event.type === 'ResponseRecorded' ? event.data.response.id : event.data.response_id;
  },
  evolve(doc, stored) {
    const event = stored as StoredEvent & ResponseEvent;
    if (event.type === 'ResponseDeleted') return null;
    const { response, org_id, session_id, input_items } = event.data;
    return doc ?? { _id: response.id, org_id, session_id, response, input_items };
  },
});

export const chatProjections = [sessionsProjection, responsesProjection];
