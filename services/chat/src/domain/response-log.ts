import { type ChatEvent, DomainError, type ResponseEvent, type ResponseItem, type ResponseObject } from '@oc/contracts';

/**
 * The Responses API's records in a chat session's stream (`chat-<session_id>`): a stored response joins the
 * session of the response it continues, recorded after the exchange the chat completion kept. Deciding needs only
 * who owns the session and which responses it holds (the state the command handler keeps stays small); the
 * conversation a response continues is folded by `responseTurns`.
 */
type StreamEvent = Extract<ChatEvent, { type: 'ChatSessionStarted' | 'ChatExchangeRecorded' }> | ResponseEvent;

export type ResponseCommand =
  | {
      type: 'RecordResponse';
      sessionId: string;
      orgId: string;
      completionId: string;
      response: ResponseObject;
      inputItems: ResponseItem[];
    }
  | { type: 'DeleteResponse'; sessionId: string; orgId: string; responseId: string; now: number };

export interface ResponseLogState {
  orgId: string | null;
  /** Each response recorded, and whether it was deleted since. */
  responses: Map<string, { deleted: boolean }>;
}

function decide(command: ResponseCommand, state: ResponseLogState): ResponseEvent[] {
  switch (command.type) {
    case 'RecordResponse': {
      // Recorded right after its exchange, which opened or continued this organization's session.
      if (state.orgId !== command.orgId) throw new DomainError({ kind: 'NotFound', resource: 'chat_session', id: command.sessionId });
      if (state.responses.has(command.response.id)) return [];
      const data = {
        session_id: command.sessionId,
        org_id: command.orgId,
        completion_id: command.completionId,
        response: command.response,
        input_items: command.inputItems,
      };
      return [{ type: 'ResponseRecorded', data }];
    }
    case 'DeleteResponse': {
      const held = state.orgId === command.orgId ? state.responses.get(command.responseId) : undefined;
      if (!held || held.deleted) throw new DomainError({ kind: 'NotFound', resource: 'response', id: command.responseId });
      return [
        {
          type: 'ResponseDeleted',
          data: { session_id: command.sessionId, org_id: command.orgId, response_id: command.responseId, deleted_at: command.now },
        },
      ];
    }
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: ResponseLogState, event: StreamEvent): ResponseLogState {
  switch (event.type) {
    case 'ChatSessionStarted':
      return { orgId: event.data.org_id, responses: new Map() };
    case 'ChatExchangeRecorded':
      return state;
    case 'ResponseRecorded':
      state.responses.set(event.data.response.id, { deleted: false });
      return state;
    case 'ResponseDeleted':
      state.responses.set(event.data.response_id, { deleted: true });
      return state;
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const responseDecider = {
  decide,
  evolve,
  initialState: (): ResponseLogState => ({ orgId: null, responses: new Map() }),
};

/** One response's turn of the conversation: the items it was sent and those it answered, and what it continued. */
export interface ResponseTurn {
  previous: string | null;
  items: ResponseItem[];
}

/** Folds a session's stream into its responses' turns, by response id (deleted ones too: later turns build on them). */
export const responseTurns = {
  initialState: (): Map<string, ResponseTurn> => new Map(),
  evolve(state: Map<string, ResponseTurn>, event: StreamEvent): Map<string, ResponseTurn> {
    if (event.type === 'ResponseRecorded') {
      const { response, input_items } = event.data;
      state.set(response.id, { previous: response.previous_response_id, items: [...input_items, ...response.output] });
    }
    return state;
  },
};

/** The items of every turn up to and including `responseId`'s, oldest first: what a response continuing it follows. */
export function conversationUpTo(turns: ReadonlyMap<string, ResponseTurn>, responseId: string): ResponseItem[] {
  const chain: ResponseTurn[] = [];
  for (let id: string | null = responseId; id !== null; ) {
    const turn = turns.get(id);
    if (!turn) break;
    chain.push(turn);
    id = turn.previous;
  }
  return chain.reverse().flatMap((turn) => turn.items);
}
