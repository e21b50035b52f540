import type { SnapshotCodec } from '@oc/eventstore';
import {
  type BillingEvent,
  BillingStreams,
  type CustomLimits,
  type ServedUsage,
  DomainError,
  LIMIT_NAMES,
  type LimitsChange,
  NO_CUSTOM_LIMITS,
  NO_KEY_BUDGET,
  streamName,
  type Tier,
} from '@oc/contracts';
import { changedBudget, checkKeyBudget, freeForKey, holdForKey, type KeyHold, type KeySpend, setKeyBudget } from './key-budget';
import { type EncodedSettled, SettledReservations } from './settled';

/**
 * The prepaid account of one organization (stream `account-<org_id>`). Available balance is
 * credited minus captured minus currently reserved, and `decide` refuses anything that would take it
 * below zero, with one exception: a Stripe refund or dispute of a top-up (`ReverseTopUp`) is debited whatever the
 * balance, since the money has already gone back, and may leave a debt; while in debt every reservation is refused
 * (402), and reservations already open still capture. Work is always paid through a reservation: reserve the bound
 * first, capture the usage after (a capture is the "usage charged" entry), release on failure.
 *
 *   reserved ──capture──▶ captured
 *      │ └────release──▶ released
 *      └──expire (at expires_at)──▶ expired   (a later capture is refused: the funds went back)
 *
 * A settled reservation is remembered, so that a repeated reserve, capture or release is harmless: a captured
 * or released one for five minutes after its settlement, an expired one until an hour past its expiry (by the
 * time of a later reservation; see `SettledReservations`). No product repeats a settlement later, and the
 * account's state stays the size of its last minutes of work, however long its history and however busy.
 *
 * A reservation for an API key (`keyId`) is also refused when it would take the key's spend (captured plus held)
 * today, this month or in all over the key's budget (`KeyBudgetChanged`, set here so that it is decided with the
 * reservations it limits); see key-budget.ts.
 */
export type AccountEvent = Extract<
  BillingEvent,
  {
    type:
      | 'OrganizationCreated'
      | 'TierChanged'
      | 'OrganizationLimitsChanged'
      | 'CreditsAdded'
      | 'FundsReserved'
      | 'ReservationCaptured'
      | 'ReservationReleased'
      | 'TopUpCredited'
      | 'TopUpReversed'
      | 'KeyBudgetChanged';
  }
>;

export type AccountCommand =
  | { type: 'CreateOrganization'; orgId: string; name: string; tier: Tier; now: number }
  /** A new tier, custom limits (enterprise only; null gives a figure back to the tier), or both. */
  | { type: 'UpdateOrganization'; orgId: string; tier?: Tier; limits?: LimitsChange }
  | { type: 'AddCredits'; orgId: string; amountMicros: number; description: string }
  | {
      type: 'ReserveFunds';
      orgId: string;
      reservationId: string;
      amountMicros: number;
      description: string;
      expiresAt: number;
      /** Unix seconds. */
      now: number;
      holder?: string;
      /** The API key the work is for: its budget is checked and the hold counted in its spend. */
      keyId?: string;
    }
  /** `now` (unix seconds) is recorded as the settlement's time, from which it is remembered. */
  | { type: 'CaptureReservation'; orgId: string; reservationId: string; amountMicros: number; usage?: ServedUsage | undefined; now: number }
  | { type: 'ReleaseReservation'; orgId: string; reservationId: string; now: number }
  /** Releases the reservation if it is still open at `now` (unix seconds) and has expired by then. */
  | { type: 'ExpireReservation'; orgId: string; reservationId: string; now: number }
  /** A Stripe top-up's money, once per `entryId` (see `accountEntries` in payment.ts). */
  | { type: 'CreditTopUp'; orgId: string; entryId: string; paymentId: string; amountMicros: number; description: string }
  /** A refund or dispute of a top-up: debited even below zero, leaving a debt (the one way the balance goes negative). */
  | { type: 'ReverseTopUp'; orgId: string; entryId: string; paymentId: string; reason: 'refund' | 'dispute'; amountMicros: number; description: string }
  /** A key's budget (micro-USD): a period left undefined keeps its limit, null removes it. */
  | { type: 'SetKeyBudget'; orgId: string; keyId: string; budget: Partial<Record<'daily' | 'monthly' | 'total', number | null | undefined>> };

export interface Reservation {
  amountMicros: number;
  /** Unix seconds; null for reservations made before reservations expired. */
  expiresAt: number | null;
  /** Absent for a reservation of no key. */
  key?: KeyHold;
}

export { REPEAT_WINDOW_SECONDS, SETTLED_RETENTION_SECONDS } from './settled';

export type AccountState =
  | { status: 'absent' }
  | {
      status: 'open';
      orgId: string;
      tier: Tier;
      customLimits: CustomLimits;
      /** Credited minus captured. */
      balanceMicros: number;
      /** Open reservations by id. */
      reservations: Map<string, Reservation>;
      /** The reservations no longer open, so that repeats are harmless. */
      settled: SettledReservations;
      /** Top-up entries applied (`TopUpCredited`, `TopUpReversed`), so that each applies once; absent before the first. */
      topUpEntries?: Record<string, true>;
      /** Each API key's budget and spend, for every key that has reserved or has a budget. */
      keys: Map<string, KeySpend>;
    };

export const accountStream = (orgId: string) => streamName(BillingStreams.account, orgId);

export function availableMicros(state: AccountState): number {
  if (state.status !== 'open') return 0;
  let reserved = 0;
  for (const r of state.reservations.values()) reserved += r.amountMicros;
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
    case 'UpdateOrganization': {
      const tier = command.tier ?? state.tier;
      // Leaving enterprise ends the agreement its custom figures came with.
      const kept = tier === 'enterprise' ? state.customLimits : NO_CUSTOM_LIMITS;
      const limits = { ...kept };
      for (const name of LIMIT_NAMES) {
        const figure = command.limits?.[name];
        if (figure !== undefined) limits[name] = figure;
      }
      if (tier !== 'enterprise' && Object.values(limits).some((figure) => figure !== null)) {
        throw new DomainError({
          kind: 'InvalidState',
          code: 'custom_limits_require_enterprise',
          message: `Custom limits are only for enterprise organizations, and this request leaves the organization ${tier}. Include "tier": "enterprise", or choose the tier whose limits fit.`,
          param: 'limits',
        });
      }
      const events: AccountEvent[] = [];
      if (tier !== state.tier) events.push({ type: 'TierChanged', data: { org_id, tier } });
      if (!sameLimits(limits, state.customLimits)) events.push({ type: 'OrganizationLimitsChanged', data: { org_id, limits } });
      return events;
    }

    case 'AddCredits':
      return [
        { type: 'CreditsAdded', data: { org_id, amount_micros: command.amountMicros, description: command.description } },
      ];

    case 'ReserveFunds': {
      if (state.reservations.has(command.reservationId) || state.settled.outcome(command.reservationId) !== undefined) return [];
      const available = availableMicros(state);
      if (available < command.amountMicros) {
        throw new DomainError({
          kind: 'InsufficientFunds',
          requiredMicros: command.amountMicros,
          availableMicros: available,
        });
      }
      if (command.keyId !== undefined) checkKeyBudget(state.keys, command.keyId, command.amountMicros, command.now);
      return [
        {
          type: 'FundsReserved',
          data: {
            org_id,
            reservation_id: command.reservationId,
            amount_micros: command.amountMicros,
            description: command.description,
            expires_at: command.expiresAt,
            reserved_at: command.now,
            ...(command.holder === undefined ? {} : { holder: command.holder }),
            ...(command.keyId === undefined ? {} : { key_id: command.keyId }),
          },
        },
      ];
    }

    case 'CaptureReservation': {
      const reserved = state.reservations.get(command.reservationId)?.amountMicros;
      if (reserved === undefined) {
        if (state.settled.outcome(command.reservationId) === 'expired') {
          throw new DomainError({
            kind: 'Conflict',
            code: 'reservation_expired',
            message: `Reservation '${command.reservationId}' expired and its funds were released; it can no longer be captured.`,
          });
        }
        return settledOrMissing(state, command.reservationId);
      }
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
            ...(command.usage ? { usage: command.usage } : {}),
            settled_at: command.now,
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
          data: { org_id, reservation_id: command.reservationId, amount_micros: reserved.amountMicros, reason: 'released', settled_at: command.now },
        },
      ];
    }

    case 'ExpireReservation': {
      const reserved = state.reservations.get(command.reservationId);
      // Without an expiry of its own (made before reservations expired), the read model's is the one applied.
      if (!reserved || (reserved.expiresAt !== null && reserved.expiresAt > command.now)) return [];
      return [
        {
          type: 'ReservationReleased',
          data: { org_id, reservation_id: command.reservationId, amount_micros: reserved.amountMicros, reason: 'expired', settled_at: command.now },
        },
      ];
    }

    case 'CreditTopUp':
      if (state.topUpEntries?.[command.entryId]) return [];
      return [
        {
          type: 'TopUpCredited',
          data: { org_id, entry_id: command.entryId, payment_id: command.paymentId, amount_micros: command.amountMicros, description: command.description },
        },
      ];

    case 'ReverseTopUp':
      if (state.topUpEntries?.[command.entryId]) return [];
      return [
        {
          type: 'TopUpReversed',
          data: {
            org_id,
            entry_id: command.entryId,
            payment_id: command.paymentId,
            reason: command.reason,
            amount_micros: command.amountMicros,
            description: command.description,
          },
        },
      ];

    case 'SetKeyBudget': {
      const current = state.keys.get(command.keyId)?.budget ?? NO_KEY_BUDGET;
      const budget = changedBudget(current, command.budget);
      if (budget.daily === current.daily && budget.monthly === current.monthly && budget.total === current.total) return [];
      return [{ type: 'KeyBudgetChanged', data: { org_id, key_id: command.keyId, ...budget } }];
    }

    default: {
      const never: never = command;
      return never;
    }
  }
}

const sameLimits = (a: CustomLimits, b: CustomLimits) => LIMIT_NAMES.every((name) => a[name] === b[name]);

function settledOrMissing(state: AccountState & { status: 'open' }, reservationId: string): AccountEvent[] {
  if (state.settled.outcome(reservationId) !== undefined) return [];
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
      customLimits: NO_CUSTOM_LIMITS,
      balanceMicros: 0,
      reservations: new Map(),
      settled: new SettledReservations(),
      keys: new Map(),
    };
  }
  if (state.status !== 'open') return state;
  switch (event.type) {
    case 'TierChanged':
      return { ...state, tier: event.data.tier };
    case 'OrganizationLimitsChanged':
      return { ...state, customLimits: event.data.limits };
    case 'CreditsAdded':
      return { ...state, balanceMicros: state.balanceMicros + event.data.amount_micros };
    case 'FundsReserved':
      if (event.data.reserved_at !== undefined) state.settled.advance(event.data.reserved_at);
      state.reservations.set(event.data.reservation_id, {
        amountMicros: event.data.amount_micros,
        expiresAt: event.data.expires_at ?? null,
        // Reservations naming a key carry reserved_at (both came after it).
        ...(event.data.key_id === undefined ? {} : { key: holdForKey(state.keys, event.data.key_id, event.data.amount_micros, event.data.reserved_at ?? 0) }),
      });
      return state;
    case 'ReservationCaptured':
      settle(state, event.data.reservation_id, 'captured', event.data.settled_at, event.data.released_micros);
      return { ...state, balanceMicros: state.balanceMicros - event.data.amount_micros };
    case 'ReservationReleased':
      settle(state, event.data.reservation_id, event.data.reason === 'expired' ? 'expired' : 'released', event.data.settled_at, event.data.amount_micros);
      return state;
    case 'KeyBudgetChanged':
      setKeyBudget(state.keys, event.data.key_id, { daily: event.data.daily, monthly: event.data.monthly, total: event.data.total });
      return state;
    case 'TopUpCredited':
      return { ...state, balanceMicros: state.balanceMicros + event.data.amount_micros, topUpEntries: { ...state.topUpEntries, [event.data.entry_id]: true } };
    case 'TopUpReversed':
      return { ...state, balanceMicros: state.balanceMicros - event.data.amount_micros, topUpEntries: { ...state.topUpEntries, [event.data.entry_id]: true } };
    default: {
      const never: never = event;
      return never;
    }
  }
}

/** `freedMicros`: what goes back to the account (all of a release, what a capture did not take). */
function settle(state: OpenAccount, reservationId: string, outcome: 'captured' | 'released' | 'expired', settledAt: number | undefined, freedMicros: number) {
  const reservation = state.reservations.get(reservationId);
  const expiresAt = reservation?.expiresAt ?? null;
  if (reservation?.key) freeForKey(state.keys, reservation.key, freedMicros);
  state.reservations.delete(reservationId);
  state.settled.add(reservationId, outcome, settledAt, expiresAt);
}

type OpenAccount = AccountState & { status: 'open' };
type EncodedAccount = Omit<OpenAccount, 'reservations' | 'settled' | 'keys'> & {
  reservations: Array<[string, Reservation]>;
  settled: EncodedSettled;
  keys: Array<[string, KeySpend]>;
};

/**
 * An account's stream grows with every reservation, so its state is kept every 10,000 events (a busy
 * organization's few minutes) and loaded from there: a load reads at most that many events, however long
 * the history. The state is encoded on the thread that decides the account's commands, so encoding does no
 * work per settled reservation: their text goes as it is held (`SettledReservations.encode`), and only the
 * open reservations (the work in flight) are listed. Version 2: settled reservations by minute of settlement;
 * version 3: the keys' budgets and spend. A snapshot of an earlier version is ignored, and the account folded from
 * its first event once.
 */
const snapshot: SnapshotCodec<AccountState> = {
  version: 3,
  every: 10_000,
  encode: (state) =>
    state.status === 'open'
      ? ({ ...state, reservations: [...state.reservations], settled: state.settled.encode(), keys: [...state.keys] } satisfies EncodedAccount)
      : state,
  decode: (data) => {
    const state = data as Exclude<AccountState, OpenAccount> | EncodedAccount;
    if (state.status !== 'open') return state;
    return { ...state, reservations: new Map(state.reservations), settled: SettledReservations.decode(state.settled), keys: new Map(state.keys) };
  },
};

export const accountDecider = { decide, evolve, initialState, snapshot };
