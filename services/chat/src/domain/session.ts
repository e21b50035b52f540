import { type ChatEvent, DomainError, type Metadata, type ResponseEvent, type StoredChatMessage, type Usage, ChatStreams, streamName } from '@oc/contracts';

/**
 * A conversation kept server-side (stream `chat-<session_id>`), owned by one organization. Each
 * completion adds one exchange: the new messages the client sent and the assistant's reply.
 * Deciding needs only who owns the session and which completions it holds; the messages themselves are
 * folded by `conversation`, when a request continues the session. So the state the command handler keeps
 * for recently used sessions stays small however long their conversations grow.
 */
export type SessionEvent = Extract<ChatEvent, { type: 'ChatSessionStarted' | 'ChatExchangeRecorded' }>;

export type SessionCommand = {
  type: 'RecordExchange';
  sessionId: string;
  orgId: string;
  /** True when the request named no session: this exchange opens it. */
  startsSession: boolean;
  completionId: string;
  messages: StoredChatMessage[];
  usage: Usage;
  /** The request's `metadata`, kept with the exchange. */
  metadata?: Metadata;
  now: number;
};

export type SessionState =
  | { status: 'absent' }
  | {
      status: 'open';
      sessionId: string;
      orgId: string;
      createdAt: number;
      /** Completions already recorded, so a repeated command is harmless. */
      completions: Set<string>;
    };

export const sessionStream = (sessionId: string) => streamName(ChatStreams.session, sessionId);

const initialState = (): SessionState => ({ status: 'absent' });

/** Another organization's session is answered exactly like a missing one. */
export function ownedSession(state: SessionState, orgId: string, sessionId: string) {
  if (state.status !== 'open' || state.orgId !== orgId) {
    throw new DomainError({ kind: 'NotFound', resource: 'chat_session', id: sessionId });
  }
  return state;
}

function decide(command: SessionCommand, state: SessionState): SessionEvent[] {
  switch (command.type) {
    case 'RecordExchange': {
      const recorded: SessionEvent = {
        type: 'ChatExchangeRecorded',
        data: {
          session_id: command.sessionId,
          org_id: command.orgId,
          completion_id: command.completionId,
          messages: command.messages,
          usage: command.usage,
          ...(command.metadata !== undefined ? { metadata: command.metadata } : {}),
        },
      };
      if (state.status === 'absent' && command.startsSession) {
        return [
          { type: 'ChatSessionStarted', data: { session_id: command.sessionId, org_id: command.orgId, created_at: command.now } },
          recorded,
        ];
      }
      const session = ownedSession(state, command.orgId, command.sessionId);
      if (session.completions.has(command.completionId)) return [];
      if (command.startsSession) {
        throw new DomainError({ kind: 'Conflict', code: 'session_exists', message: `Session '${command.sessionId}' already exists.` });
      }
      return [recorded];
    }
    default: {
      const never: never = command.type;
      return never;
    }
  }
}

/**
 * Sessions grow with every exchange, so evolve adds in place: a state given to it is not reused. The stream also
 * holds the Responses API's records (response-log.ts), which decide nothing here.
 */
function evolve(state: SessionState, event: SessionEvent | ResponseEvent): SessionState {
  switch (event.type) {
    case 'ResponseRecorded':
    case 'ResponseDeleted':
      return state;
    case 'ChatSessionStarted':
      return {
        status: 'open',
        sessionId: event.data.session_id,
        orgId: event.data.org_id,
        createdAt: event.data.created_at,
        completions: new Set(),
      };
    case 'ChatExchangeRecorded':
      if (state.status !== 'open') return state;
      state.completions.add(event.data.completion_id);
      return state;
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const sessionDecider = { decide, evolve, initialState };

/** The messages of a session in order, with its owner; `null` owner while the session does not exist. */
export type Conversation = { orgId: string | null; messages: StoredChatMessage[] };

/** Folds a session's stream into its conversation (in place, like `evolve`). */
export const conversation = {
  initialState: (): Conversation => ({ orgId: null, messages: [] }),
  evolve(state: Conversation, event: SessionEvent | ResponseEvent): Conversation {
    if (event.type === 'ChatSessionStarted') return { orgId: event.data.org_id, messages: [] };
    if (event.type === 'ChatExchangeRecorded') state.messages.push(...event.data.messages);
    return state;
  },
};

/** The messages of a session the organization owns; another organization's is answered like a missing one. */
export function ownedConversation(state: Conversation, orgId: string, sessionId: string): StoredChatMessage[] {
  if (state.orgId !== orgId) throw new DomainError({ kind: 'NotFound', resource: 'chat_session', id: sessionId });
  return state.messages;
}
