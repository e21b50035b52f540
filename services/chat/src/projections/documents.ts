import type { StoredChatMessage } from '@oc/contracts';

export const ChatCollections = { sessions: 'chat_sessions' } as const;

export interface ChatSessionDoc {
  _id: string;
  org_id: string;
  created_at: number;
  messages: StoredChatMessage[];
  [key: string]: unknown;
}
