import { type ChatEvent, ChatStreams, streamName } from '@oc/contracts';

/**
 * One paid completion (stream `completion-<id>`): the durable half of its reservation. It is recorded
 * before billing holds any funds, so that a completion whose process dies is found and settled.
 *
 *   absent ──Start──▶ open ──Settle(charged | released | interrupted)──▶ settled
 *
 * A replica settles, as `interrupted`, the completions it left open when it starts again, and any replica
 * settles those still open well past their deadline (their replica never came back). Settling what is
 * already settled, or was never started, decides nothing, so two replicas may race on it.
 */
export type CompletionEvent = Extract<ChatEvent, { type: 'CompletionStarted' | 'CompletionSettled' }>;
type Settled = Extract<CompletionEvent, { type: 'CompletionSettled' }>['data'];

export type CompletionCommand =
  | {
      type: 'StartCompletion';
      completionId: string;
      orgId: string;
      replica: string;
      reservedMicros: number;
      now: number;
      deadline: number;
    }
  | { type: 'SettleCompletion'; completionId: string; outcome: Settled['outcome']; chargedMicros: number };

export type CompletionState =
  | { status: 'absent' }
  | { status: 'open' | 'settled'; completionId: string; orgId: string };

export const completionStream = (completionId: string) => streamName(ChatStreams.completion, completionId);

const initialState = (): CompletionState => ({ status: 'absent' });

function decide(command: CompletionCommand, state: CompletionState): CompletionEvent[] {
  switch (command.type) {
    case 'StartCompletion':
      if (state.status !== 'absent') return [];
      return [
        {
          type: 'CompletionStarted',
          data: {
            completion_id: command.completionId,
            org_id: command.orgId,
            replica: command.replica,
            reserved_micros: command.reservedMicros,
            started_at: command.now,
            deadline: command.deadline,
          },
        },
      ];
    case 'SettleCompletion':
      if (state.status !== 'open') return [];
      return [
        {
          type: 'CompletionSettled',
          data: {
            completion_id: state.completionId,
            org_id: state.orgId,
            outcome: command.outcome,
            charged_micros: command.chargedMicros,
          },
        },
      ];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: CompletionState, event: CompletionEvent): CompletionState {
  switch (event.type) {
    case 'CompletionStarted':
      return { status: 'open', completionId: event.data.completion_id, orgId: event.data.org_id };
    case 'CompletionSettled':
      return state.status === 'absent' ? state : { ...state, status: 'settled' };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const completionDecider = { decide, evolve, initialState };
