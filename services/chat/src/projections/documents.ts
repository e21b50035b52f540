import type { ResponseItem, ResponseObject, StoredChatMessage } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';

export const ChatCollections = { sessions: 'chat_sessions', responses: 'chat_responses' } as const;

export interface ChatSessionDoc {
  _id: string;
  org_id: string;
  created_at: number;
  messages: StoredChatMessage[];
  [key: string]: unknown;
}

/** A stored response (the Responses API), with the items it was sent and the session it belongs to. */
export interface ChatResponseDoc {
  _id: string;
  org_id: string;
  session_id: string;
  response: ResponseObject;
  input_items: ResponseItem[];
  [key: string]: unknown;
}

/** An organization's sessions, newest first; responses are read by id only. */
export const chatCollections: CollectionSpec[] = [
  { name: ChatCollections.sessions, indexes: [['org_id', 'created_at']] },
  { name: ChatCollections.responses, indexes: [] },
];
