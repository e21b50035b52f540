import { createHash } from 'node:crypto';
import { type BillingEvent, BillingStreams, DomainError, streamName } from '@oc/contracts';

/**
 * A console member (stream `member-<SHA-256 of the email>`). One stream per email address is what keeps an
 * address to one member across every organization: two concurrent creates race on the same stream and the
 * optimistic-concurrency check lets one through. A removed member's address may be given to a new member.
 */
export type MemberEvent = Extract<BillingEvent, { type: 'MemberCreated' | 'MemberRemoved' }>;

export type MemberCommand =
  | {
      type: 'CreateMember';
      memberId: string;
      orgId: string;
      email: string;
      name: string | null;
      passwordHash: string;
      now: number;
    }
  | { type: 'RemoveMember'; memberId: string; orgId: string; now: number };

export type MemberState = { status: 'absent' } | { status: 'active'; memberId: string; orgId: string };

/** Emails are personal data: the stream is named by a hash of the address, never by the address. */
export const memberStream = (email: string) => streamName(BillingStreams.member, createHash('sha256').update(email).digest('hex'));

function decide(command: MemberCommand, state: MemberState): MemberEvent[] {
  switch (command.type) {
    case 'CreateMember':
      if (state.status === 'active') {
        throw new DomainError({
          kind: 'Conflict',
          code: 'member_exists',
          message: `A member with the email '${command.email}' already exists.`,
        });
      }
      return [
        {
          type: 'MemberCreated',
          data: {
            member_id: command.memberId,
            org_id: command.orgId,
            email: command.email,
            name: command.name,
            password_hash: command.passwordHash,
            created: command.now,
          },
        },
      ];
    case 'RemoveMember':
      // Another organization's member, or one already removed, is as absent as one that never existed.
      if (state.status !== 'active' || state.memberId !== command.memberId || state.orgId !== command.orgId) {
        throw new DomainError({ kind: 'NotFound', resource: 'member', id: command.memberId });
      }
      return [{ type: 'MemberRemoved', data: { member_id: state.memberId, org_id: state.orgId, removed_at: command.now } }];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: MemberState, event: MemberEvent): MemberState {
  switch (event.type) {
    case 'MemberCreated':
      return { status: 'active', memberId: event.data.member_id, orgId: event.data.org_id };
    case 'MemberRemoved':
      return { status: 'absent' };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const memberDecider = { decide, evolve, initialState: (): MemberState => ({ status: 'absent' }) };
