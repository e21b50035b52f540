import { DomainError, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { type ConsoleSessionEvent, consoleSessionDecider } from '../src/domain/console-session';
import { type MemberEvent, memberDecider, memberStream } from '../src/domain/member';

const members = deciderSpec(memberDecider);
const sessions = deciderSpec(consoleSessionDecider);

const create = (memberId: string, orgId = 'org_1') =>
  ({ type: 'CreateMember', memberId, orgId, email: 'ada@example.com', name: 'Ada', passwordHash: '$scrypt$x', now: 10 }) as const;
const created = (member_id: string, org_id = 'org_1'): MemberEvent => ({
  type: 'MemberCreated',
  data: { member_id, org_id, email: 'ada@example.com', name: 'Ada', password_hash: '$scrypt$x', created: 10 },
});
const removed: MemberEvent = { type: 'MemberRemoved', data: { member_id: 'mem_1', org_id: 'org_1', removed_at: 20 } };

const code = (result: object) => {
  if (!('error' in result)) throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error).toBody().error.code;
};

describe('member decider', () => {
  it('gives an email address to one member at a time, in any organization', () => {
    expect(members.given([]).when(create('mem_1'))).toEqual({ events: [created('mem_1')] });
    expect(code(members.given([created('mem_1')]).when(create('mem_2', 'org_2')))).toBe('member_exists');
    // Once removed, the address may be given to someone new.
    expect(members.given([created('mem_1'), removed]).when(create('mem_2', 'org_2'))).toEqual({ events: [created('mem_2', 'org_2')] });
  });

  it('removes a member of the organization that asks, and answers 404 for any other', () => {
    const given = members.given([created('mem_1')]);
    expect(given.when({ type: 'RemoveMember', memberId: 'mem_1', orgId: 'org_1', now: 20 })).toEqual({ events: [removed] });
    expect(code(given.when({ type: 'RemoveMember', memberId: 'mem_1', orgId: 'org_2', now: 20 }))).toBe('resource_not_found');
    expect(code(members.given([created('mem_1'), removed]).when({ type: 'RemoveMember', memberId: 'mem_1', orgId: 'org_1', now: 30 }))).toBe(
      'resource_not_found',
    );
  });

  it('names its stream by a hash of the address, never by the address', () => {
    expect(memberStream('ada@example.com')).toMatch(/^member-[0-9a-f]{64}$/);
  });
});

describe('console session decider', () => {
  const started: ConsoleSessionEvent = {
    type: 'ConsoleSessionStarted',
    data: {
      session_id: 'cs_1',
      token_hash: 'h'.repeat(64),
      kind: 'member',
      member_id: 'mem_1',
      org_id: 'org_1',
      credential: null,
      created: 10,
      expires_at: 100,
    },
  };
  it('starts once and ends once; signing out again changes nothing', () => {
    const start = {
      type: 'StartConsoleSession',
      sessionId: 'cs_1',
      tokenHash: 'h'.repeat(64),
      subject: { kind: 'member', memberId: 'mem_1', orgId: 'org_1' },
      expiresAt: 100,
      now: 10,
    } as const;
    expect(sessions.given([]).when(start)).toEqual({ events: [started] });
    expect(code(sessions.given([started]).when(start))).toBe('session_exists');
    const ended: ConsoleSessionEvent = { type: 'ConsoleSessionEnded', data: { session_id: 'cs_1', ended_at: 50 } };
    expect(sessions.given([started]).when({ type: 'EndConsoleSession', sessionId: 'cs_1', now: 50 })).toEqual({ events: [ended] });
    expect(sessions.given([started, ended]).when({ type: 'EndConsoleSession', sessionId: 'cs_1', now: 60 })).toEqual({ events: [] });
  });
});
