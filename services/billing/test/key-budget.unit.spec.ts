import { DomainError, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountCommand, type AccountEvent, type AccountState } from '../src/domain/account';

const spec = deciderSpec(accountDecider);
const org_id = 'org_1';
const key_id = 'key_1';
/** 2026-03-31 23:59:00 UTC: a minute before both a new day and a new month. */
const MARCH_31_LATE = Date.UTC(2026, 2, 31, 23, 59) / 1000;
const APRIL_1 = Date.UTC(2026, 3, 1, 0, 0) / 1000;
const APRIL_2 = Date.UTC(2026, 3, 2, 12, 0) / 1000;

const opened: AccountEvent[] = [
  { type: 'OrganizationCreated', data: { org_id, name: 'Acme', tier: 'standard', created: 1 } },
  { type: 'CreditsAdded', data: { org_id, amount_micros: 1_000_000_000, description: 'top-up' } },
];
const budget = (daily: number | null, monthly: number | null = null, total: number | null = null): AccountEvent => ({
  type: 'KeyBudgetChanged',
  data: { org_id, key_id, daily, monthly, total },
});
const reserved = (reservation_id: string, amount_micros: number, at: number, key = key_id): AccountEvent => ({
  type: 'FundsReserved',
  data: { org_id, reservation_id, amount_micros, description: 'chat', expires_at: at + 600, reserved_at: at, key_id: key },
});
const captured = (reservation_id: string, amount_micros: number, released_micros: number, at: number): AccountEvent => ({
  type: 'ReservationCaptured',
  data: { org_id, reservation_id, amount_micros, released_micros, settled_at: at },
});
const released = (reservation_id: string, amount_micros: number, at: number, reason: 'released' | 'expired' = 'released'): AccountEvent => ({
  type: 'ReservationReleased',
  data: { org_id, reservation_id, amount_micros, reason, settled_at: at },
});
const reserve = (reservationId: string, amountMicros: number, now: number, keyId: string | null = key_id): AccountCommand => ({
  type: 'ReserveFunds',
  orgId: org_id,
  reservationId,
  amountMicros,
  description: 'chat',
  expiresAt: now + 600,
  now,
  ...(keyId === null ? {} : { keyId }),
});

const refusal = (result: { events: AccountEvent[] } | { error: unknown }) => {
  if (!('error' in result)) throw new Error(`expected a refusal, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error);
};
const accepted = (result: { events: AccountEvent[] } | { error: unknown }) => {
  if ('error' in result) throw result.error;
  return result.events;
};

describe('account decider: API key budgets', () => {
  it('records a reservation for a key with its key, and refuses one that would pass the daily budget, naming it and what is left', () => {
    const given = [...opened, budget(1_000_000), reserved('r1', 600_000, MARCH_31_LATE)];
    expect(accepted(spec.given(given).when(reserve('r2', 400_000, MARCH_31_LATE)))).toEqual([
      expect.objectContaining({ type: 'FundsReserved', data: expect.objectContaining({ reservation_id: 'r2', key_id }) }),
    ]);
    const error = refusal(spec.given(given).when(reserve('r2', 400_001, MARCH_31_LATE)));
    expect(error).toMatchObject({ status: 402, type: 'insufficient_quota', code: 'key_budget_exceeded' });
    expect(error.message).toBe(
      "This request would exceed the daily budget of the API key 'key_1' ($1.00): it requires $0.400001 and $0.40 is left today (UTC).",
    );
  });

  it('refuses by the monthly and the total budget too, each named', () => {
    const monthly = refusal(spec.given([...opened, budget(null, 500_000), reserved('r1', 300_000, APRIL_1)]).when(reserve('r2', 300_000, APRIL_2)));
    expect(monthly).toMatchObject({ code: 'key_budget_exceeded' });
    expect(monthly.message).toContain('monthly budget');
    expect(monthly.message).toContain('$0.20 is left this month (UTC)');
    const total = refusal(spec.given([...opened, budget(null, null, 500_000), reserved('r1', 300_000, MARCH_31_LATE)]).when(reserve('r2', 300_000, APRIL_2)));
    expect(total.message).toContain('total budget');
    expect(total.message).toContain('$0.20 is left in all');
  });

  it('rolls the day over at UTC midnight and the month at its first day, by the reservation time', () => {
    const given = [...opened, budget(1_000_000, 1_500_000), reserved('r1', 1_000_000, MARCH_31_LATE), captured('r1', 1_000_000, 0, MARCH_31_LATE)];
    // The same minute: the day is spent.
    expect(refusal(spec.given(given).when(reserve('r2', 1, MARCH_31_LATE))).message).toContain('daily budget');
    // A minute later it is a new day and a new month: all of both budgets is there again.
    expect(accepted(spec.given(given).when(reserve('r2', 1_000_000, APRIL_1)))).toHaveLength(1);
    // Within April, the month keeps counting across days.
    const april = [...given, reserved('r2', 1_000_000, APRIL_1), captured('r2', 1_000_000, 0, APRIL_1)];
    expect(refusal(spec.given(april).when(reserve('r3', 500_001, APRIL_2))).message).toContain('monthly budget');
    expect(accepted(spec.given(april).when(reserve('r3', 500_000, APRIL_2)))).toHaveLength(1);
  });

  it('counts only what a capture took; a release or an expiry frees all of its hold', () => {
    const given = [...opened, budget(1_000_000), reserved('r1', 800_000, MARCH_31_LATE)];
    expect(refusal(spec.given(given).when(reserve('r2', 200_001, MARCH_31_LATE))).message).toContain('$0.20 is left');
    const capturedPart = [...given, captured('r1', 300_000, 500_000, MARCH_31_LATE)];
    expect(refusal(spec.given(capturedPart).when(reserve('r2', 700_001, MARCH_31_LATE))).message).toContain('$0.70 is left');
    expect(accepted(spec.given(capturedPart).when(reserve('r2', 700_000, MARCH_31_LATE)))).toHaveLength(1);
    expect(accepted(spec.given([...given, released('r1', 800_000, MARCH_31_LATE)]).when(reserve('r2', 1_000_000, MARCH_31_LATE)))).toHaveLength(1);
    expect(accepted(spec.given([...given, released('r1', 800_000, MARCH_31_LATE, 'expired')]).when(reserve('r2', 1_000_000, MARCH_31_LATE)))).toHaveLength(1);
  });

  it("leaves a new day's figures alone when yesterday's hold is captured or released after midnight", () => {
    const given = [...opened, budget(1_000_000), reserved('late', 900_000, MARCH_31_LATE), reserved('early', 600_000, APRIL_1)];
    // Yesterday's hold released after midnight gives nothing to today, which has 0.40 USD left.
    const after = [...given, released('late', 900_000, APRIL_1)];
    expect(refusal(spec.given(after).when(reserve('r3', 400_001, APRIL_1))).message).toContain('$0.40 is left today');
    expect(accepted(spec.given(after).when(reserve('r3', 400_000, APRIL_1)))).toHaveLength(1);
  });

  it("limits only its own key: another key and work of no key are unaffected", () => {
    const given = [...opened, budget(1_000_000), reserved('r1', 1_000_000, MARCH_31_LATE)];
    expect(refusal(spec.given(given).when(reserve('r2', 1, MARCH_31_LATE))).code).toBe('key_budget_exceeded');
    expect(accepted(spec.given(given).when(reserve('r2', 5_000_000, MARCH_31_LATE, 'key_2')))).toHaveLength(1);
    expect(accepted(spec.given(given).when(reserve('r2', 5_000_000, MARCH_31_LATE, null)))).toHaveLength(1);
  });

  it('counts spend made before a budget was set, and a budget removed (null) limits nothing', () => {
    const spent = [...opened, reserved('r1', 700_000, MARCH_31_LATE), captured('r1', 700_000, 0, MARCH_31_LATE)];
    expect(refusal(spec.given([...spent, budget(1_000_000)]).when(reserve('r2', 300_001, MARCH_31_LATE))).message).toContain('$0.30 is left');
    expect(accepted(spec.given([...spent, budget(1_000_000), budget(null)]).when(reserve('r2', 5_000_000, MARCH_31_LATE)))).toHaveLength(1);
  });

  it('sets a budget period by period: an undefined period keeps its limit, null removes it, no change records nothing', () => {
    const given = [...opened, budget(1_000_000, 5_000_000)];
    expect(accepted(spec.given(given).when({ type: 'SetKeyBudget', orgId: org_id, keyId: key_id, budget: { total: 9_000_000 } }))).toEqual([
      { type: 'KeyBudgetChanged', data: { org_id, key_id, daily: 1_000_000, monthly: 5_000_000, total: 9_000_000 } },
    ]);
    expect(accepted(spec.given(given).when({ type: 'SetKeyBudget', orgId: org_id, keyId: key_id, budget: { daily: null } }))).toEqual([
      { type: 'KeyBudgetChanged', data: { org_id, key_id, daily: null, monthly: 5_000_000, total: null } },
    ]);
    expect(accepted(spec.given(given).when({ type: 'SetKeyBudget', orgId: org_id, keyId: key_id, budget: { daily: 1_000_000 } }))).toEqual([]);
  });

  it('keeps the balance check first: an organization without funds is refused for its funds', () => {
    const poor: AccountEvent[] = [opened[0]!, { type: 'CreditsAdded', data: { org_id, amount_micros: 100, description: 'x' } }, budget(1_000_000)];
    expect(refusal(spec.given(poor).when(reserve('r1', 200, MARCH_31_LATE))).code).toBe('insufficient_quota');
  });

  it("round-trips the keys' budgets and spend, and open holds, through its snapshot", () => {
    const events = [...opened, budget(1_000_000, null, 3_000_000), reserved('r1', 400_000, MARCH_31_LATE), reserved('r2', 250_000, MARCH_31_LATE, 'key_2'), captured('r2', 100_000, 150_000, MARCH_31_LATE)];
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    const codec = accountDecider.snapshot;
    const restored = codec.decode(JSON.parse(JSON.stringify(codec.encode(state)))) as AccountState;
    const figures = (s: AccountState) => (s.status === 'open' ? { balance: s.balanceMicros, reservations: s.reservations, keys: s.keys } : s);
    expect(figures(restored)).toEqual(figures(state));
    // Decided alike from the restored state: 0.60 USD left of the key's day.
    const decide = (s: AccountState, command: AccountCommand) => {
      try {
        return accountDecider.decide(command, s);
      } catch (error) {
        return toApiError(error).message;
      }
    };
    expect(decide(restored, reserve('r3', 600_001, MARCH_31_LATE))).toContain('$0.60 is left today');
    expect(decide(restored, reserve('r3', 600_001, MARCH_31_LATE))).toEqual(decide(state, reserve('r3', 600_001, MARCH_31_LATE)));
    // Releasing the restored hold frees it.
    const afterRelease = accountDecider.evolve(restored, released('r1', 400_000, MARCH_31_LATE));
    expect(accountDecider.decide(reserve('r3', 1_000_000, MARCH_31_LATE), afterRelease)).toHaveLength(1);
    expect(codec.version).toBe(3);
  });
});
