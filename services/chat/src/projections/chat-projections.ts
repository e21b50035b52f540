import type { ChatEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { documentProjection } from '@oc/readmodel';
import { ChatCollections, type ChatSessionDoc } from './documents';

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
        return doc && { ...doc, messages: [...doc.messages, ...event.data.messages] };
      default:
        return doc;
    }
  },
});

export const chatProjections = [sessionsProjection];
