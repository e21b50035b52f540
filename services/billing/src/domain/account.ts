import { type BillingEvent, DomainError, type Tier } from '@oc/contracts';

/**
 * The prepaid account of one organization (stream `account-<org_id>`). Available balance is
 * credited minus captured minus currently reserved, and `decide` refuses anything that would take it
 * below zero. Work is always paid through a reservation: reserve the bound first, capture the usage
 * after (a capture is the "usage charged" entry), release on failure.
 */
export type AccountEvent = Extract<
  BillingEvent,
  { type: 'OrganizationCreated' | 'TierChanged' | 'CreditsAdded' | 'FundsReserved' | 'ReservationCaptured' | 'ReservationReleased' }
>;

export type AccountCommand =
  | { type: 'CreateOrganization'; orgId: string; name: string; tier: Tier; now: number }
  | { type: 'ChangeTier'; orgId: string; tier: Tier }
  | { type: 'AddCredits'; orgId: string; amountMicros: number; description: string }
  | { type: 'ReserveFunds'; orgId: string; reservationId: string; amountMicros: number; description: string }
  | { type: 'CaptureReservation'; orgId: string; reservationId: string; amountMicros: number }
  | { type: 'ReleaseReservation'; orgId: string; reservationId: string };

export type AccountState =
  | { status: 'absent' }
  | {
      status: 'open';
      orgId: string;
      tier: Tier;
      /** Credited minus captured. */
      balanceMicros: number;
      /** Open reservations by id. */
      reservations: Map<string, number>;
      /** Reservations already captured or released, so repeats are harmless. */
      settled: Set<string>;
    };

export const accountStream = (orgId: string) => `account-${orgId}`;

export function availableMicros(state: AccountState): number {
  if (state.status !== 'open') return 0;
  let reserved = 0;
  for (const amount of state.reservations.values()) reserved += amount;
  return state.balanceMicros - reserved;
}

export function reservedMicros(state: AccountState): number {
  return state.status === 'open' ? state.balanceMicros - availableMicros(state) : 0;
}

const initialState = (): AccountState => ({ status: 'absent' });

function decide(command: AccountCommand, state: AccountState): AccountEvent[] {
  if (command.type === 'CreateOrganization') {
    if (state.status === 'open') {
      throw new DomainError({ kind: 'Conflict', code: 'organization_exists', message: 'The organization already exists.' });
    }
    return [
      {
        type: 'OrganizationCreated',
        data: { org_id: command.orgId, name: command.name, tier: command.tier, created: command.now },
      },
    ];
  }
  if (state.status !== 'open') throw new DomainError({ kind: 'NotFound', resource: 'organization', id: command.orgId });
  const org_id = state.orgId;

  switch (command.type) {
    case 'ChangeTier':
      return command.tier === state.tier ? [] : [{ type: 'TierChanged', data: { org_id, tier: command.tier } }];

    case 'AddCredits':
      return [
        { type: 'CreditsAdded', data: { org_id, amount_micros: command.amountMicros, description: command.description } },
      ];

    case 'ReserveFunds': {
      if (state.reservations.has(command.reservationId) || state.settled.has(command.reservationId)) return [];
      const available = availableMicros(state);
      if (available < command.amountMicros) {
        throw new DomainError({
          kind: 'InsufficientFunds',
          requiredMicros: command.amountMicros,
          availableMicros: available,
        });
      }
      return [
        {
          type: 'FundsReserved',
          data: {
            org_id,
            reservation_id: command.reservationId,
            amount_micros: command.amountMicros,
            description: command.description,
          },
        },
      ];
    }

    case 'CaptureReservation': {
      const reserved = state.reservations.get(command.reservationId);
      if (reserved === undefined) return settledOrMissing(state, command.reservationId);
      if (command.amountMicros > reserved) {
        throw new DomainError({
          kind: 'InvalidState',
          code: 'capture_exceeds_reservation',
          message: `Cannot capture ${command.amountMicros} micro-USD from a reservation of ${reserved}.`,
        });
      }
      return [
        {
          type: 'ReservationCaptured',
          data: {
            org_id,
            reservation_id: command.reservationId,
            amount_micros: command.amountMicros,
            released_micros: reserved - command.amountMicros,
          },
        },
      ];
    }

    case 'ReleaseReservation': {
      const reserved = state.reservations.get(command.reservationId);
      if (reserved === undefined) return settledOrMissing(state, command.reservationId);
      return [
        {
          type: 'ReservationReleased',
          data: { org_id, reservation_id: command.reservationId, amount_micros: reserved },
        },
      ];
    }

    default: {
      const never: never = command;
      return never;
    }
  }
}

function settledOrMissing(state: AccountState & { status: 'open' }, reservationId: string): AccountEvent[] {
  if (state.settled.has(reservationId)) return [];
  throw new DomainError({ kind: 'NotFound', resource: 'reservation', id: reservationId });
}

/**
 * Folding a long account stream must stay linear, so evolve updates the reservation collections in
 * place: a state handed to evolve is never used again by its caller.
 */
function evolve(state: AccountState, event: AccountEvent): AccountState {
  if (event.type === 'OrganizationCreated') {
    return {
      status: 'open',
      orgId: event.data.org_id,
      tier: event.data.tier,
      balanceMicros: 0,
      reservations: new Map(),
      settled: new Set(),
    };
  }
  if (state.status !== 'open') return state;
  switch (event.type) {
    case 'TierChanged':
      return { ...state, tier: event.data.tier };
    case 'CreditsAdded':
      return { ...state, balanceMicros: state.balanceMicros + event.data.amount_micros };
    case 'FundsReserved':
      state.reservations.set(event.data.reservation_id, event.data.amount_micros);
      return state;
    case 'ReservationCaptured':
    case 'ReservationReleased': {
      state.reservations.delete(event.data.reservation_id);
      state.settled.add(event.data.reservation_id);
      const captured = event.type === 'ReservationCaptured' ? event.data.amount_micros : 0;
      return { ...state, balanceMicros: state.balanceMicros - captured };
    }
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const accountDecider = { decide, evolve, initialState };
