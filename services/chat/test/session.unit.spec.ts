import { DomainError, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { conversation, ownedConversation, type SessionCommand, sessionDecider, type SessionEvent } from '../src/domain/session';

const spec = deciderSpec(sessionDecider);
const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
const messages = [
  { role: 'user' as const, content: 'Hi', created_at: 100 },
  { role: 'assistant' as const, content: 'Hello!', created_at: 101 },
];
const started: SessionEvent = { type: 'ChatSessionStarted', data: { session_id: 'chat_1', org_id: 'org_1', created_at: 100 } };
const recorded = (completion_id: string): SessionEvent => ({
  type: 'ChatExchangeRecorded',
  data: { session_id: 'chat_1', org_id: 'org_1', completion_id, messages, usage },
});
const exchange = (over: Partial<SessionCommand> = {}): SessionCommand => ({
  type: 'RecordExchange',
  sessionId: 'chat_1',
  orgId: 'org_1',
  startsSession: false,
  completionId: 'chatcmpl_2',
  messages,
  usage,
  now: 100,
  ...over,
});

const errorBody = (result: { events: unknown } | { error: unknown }) => {
  if (!('error' in result)) throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error).toBody();
};

describe('chat session decider', () => {
  it('opens a session with its first exchange', () => {
    expect(spec.given([]).when(exchange({ startsSession: true, completionId: 'chatcmpl_1' }))).toEqual({
      events: [started, recorded('chatcmpl_1')],
    });
  });

  it('appends later exchanges to the session', () => {
    expect(spec.given([started, recorded('chatcmpl_1')]).when(exchange())).toEqual({ events: [recorded('chatcmpl_2')] });
  });

  it('records a repeated completion only once', () => {
    expect(spec.given([started, recorded('chatcmpl_2')]).when(exchange())).toEqual({ events: [] });
  });

  it.each([
    ['an unknown session', [] as SessionEvent[], exchange()],
    ["another organization's session", [started], exchange({ orgId: 'org_2' })],
  ])('answers %s with 404 resource_not_found', (_, given, command) => {
    expect(errorBody(spec.given(given).when(command))).toEqual({
      error: { type: 'invalid_request_error', code: 'resource_not_found', message: "No chat session found with id 'chat_1'." },
    });
  });

  it('refuses to open a session that already exists', () => {
    expect(errorBody(spec.given([started]).when(exchange({ startsSession: true }))).error.code).toBe('session_exists');
  });

  it('folds the whole conversation in order, for its owner only', () => {
    const state = [started, recorded('chatcmpl_1'), recorded('chatcmpl_2')].reduce(conversation.evolve, conversation.initialState());
    expect(ownedConversation(state, 'org_1', 'chat_1')).toEqual([...messages, ...messages]);
    const notFound = (fold: () => unknown) => {
      try {
        fold();
      } catch (error) {
        return errorBody({ error }).error.code;
      }
      return 'no error';
    };
    expect(notFound(() => ownedConversation(state, 'org_2', 'chat_1'))).toBe('resource_not_found');
    expect(notFound(() => ownedConversation(conversation.initialState(), 'org_1', 'chat_1'))).toBe('resource_not_found');
  });

  it('keeps no messages in the state it decides on, so kept sessions stay small', () => {
    const state = [started, recorded('chatcmpl_1'), recorded('chatcmpl_2')].reduce(sessionDecider.evolve, sessionDecider.initialState());
    expect(state).toEqual({ status: 'open', sessionId: 'chat_1', orgId: 'org_1', createdAt: 100, completions: new Set(['chatcmpl_1', 'chatcmpl_2']) });
  });
});
