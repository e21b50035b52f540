import type { StoredChatMessage } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';

export const ChatCollections = { sessions: 'chat_sessions' } as const;

export interface ChatSessionDoc {
  _id: string;
  org_id: string;
  created_at: number;
  messages: StoredChatMessage[];
  [key: string]: unknown;
}

/** An organization's sessions, newest first. */
export const chatCollections: CollectionSpec[] = [{ name: ChatCollections.sessions, indexes: [['org_id', 'created_at']] }];
