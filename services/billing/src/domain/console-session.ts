import { type BillingEvent, BillingStreams, DomainError, streamName } from '@oc/contracts';

/**
 * One sign-in to the web console (stream `consolesession-<session_id>`): started by a member's password or
 * the admin token, ended by signing out. Only the SHA-256 of the session's token is stored; the token lives
 * in the browser's HttpOnly cookie.
 */
export type ConsoleSessionEvent = Extract<BillingEvent, { type: 'ConsoleSessionStarted' | 'ConsoleSessionEnded' }>;

export type ConsoleSessionCommand =
  | {
      type: 'StartConsoleSession';
      sessionId: string;
      tokenHash: string;
      subject: { kind: 'member'; memberId: string; orgId: string } | { kind: 'operator'; credential: string };
      expiresAt: number;
      now: number;
    }
  | { type: 'EndConsoleSession'; sessionId: string; now: number };

export type ConsoleSessionState = { status: 'absent' | 'active' | 'ended' };

export const consoleSessionStream = (sessionId: string) => streamName(BillingStreams.consoleSession, sessionId);

function decide(command: ConsoleSessionCommand, state: ConsoleSessionState): ConsoleSessionEvent[] {
  switch (command.type) {
    case 'StartConsoleSession': {
      if (state.status !== 'absent') {
        throw new DomainError({ kind: 'Conflict', code: 'session_exists', message: 'The session already exists.' });
      }
      const { subject } = command;
      return [
        {
          type: 'ConsoleSessionStarted',
          data: {
            session_id: command.sessionId,
            token_hash: command.tokenHash,
            kind: subject.kind,
            member_id: subject.kind === 'member' ? subject.memberId : null,
            org_id: subject.kind === 'member' ? subject.orgId : null,
            credential: subject.kind === 'operator' ? subject.credential : null,
            created: command.now,
            expires_at: command.expiresAt,
          },
        },
      ];
    }
    case 'EndConsoleSession':
      // Signing out twice, or out of a session that is gone, is not an error: the session is over either way.
      if (state.status !== 'active') return [];
      return [{ type: 'ConsoleSessionEnded', data: { session_id: command.sessionId, ended_at: command.now } }];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: ConsoleSessionState, event: ConsoleSessionEvent): ConsoleSessionState {
  switch (event.type) {
    case 'ConsoleSessionStarted':
      return { status: 'active' };
    case 'ConsoleSessionEnded':
      return { status: 'ended' };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const consoleSessionDecider = {
  decide,
  evolve,
  initialState: (): ConsoleSessionState => ({ status: 'absent' }),
};
