import type { StoredChatMessage } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';

export const ChatCollections = { sessions: 'chat_sessions', openCompletions: 'chat_open_completions' } as const;

export interface ChatSessionDoc {
  _id: string;
  org_id: string;
  created_at: number;
  messages: StoredChatMessage[];
  [key: string]: unknown;
}

/** A paid completion not yet settled; gone once it is. */
export interface OpenCompletionDoc {
  _id: string;
  org_id: string;
  replica: string;
  /** Unix milliseconds. */
  deadline: number;
  [key: string]: unknown;
}

/** An organization's sessions, newest first; open completions by replica, and by deadline. */
export const chatCollections: CollectionSpec[] = [
  { name: ChatCollections.sessions, indexes: [['org_id', 'created_at']] },
  { name: ChatCollections.openCompletions, indexes: [['replica', 'deadline'], ['deadline']] },
];
