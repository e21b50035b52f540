import { type CustomLimits, DomainError, NO_CUSTOM_LIMITS, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountEvent, SETTLED_RETENTION_SECONDS } from '../src/domain/account';

const spec = deciderSpec(accountDecider);
const org_id = 'org_1';
const created: AccountEvent = { type: 'OrganizationCreated', data: { org_id, name: 'Acme', tier: 'free', created: 1 } };
const credited = (amount_micros: number): AccountEvent => ({
  type: 'CreditsAdded',
  data: { org_id, amount_micros, description: 'top-up' },
});
const NOW = 1_000;
const EXPIRES_AT = 5_000;
const reserved = (reservation_id: string, amount_micros: number, at = NOW, expires_at = EXPIRES_AT): AccountEvent => ({
  type: 'FundsReserved',
  data: { org_id, reservation_id, amount_micros, description: 'video', expires_at, reserved_at: at },
});
const capturedAll = (reservation_id: string, amount_micros: number): AccountEvent => ({
  type: 'ReservationCaptured',
  data: { org_id, reservation_id, amount_micros, released_micros: 0 },
});

const errorBody = (result: ReturnType<ReturnType<typeof spec.given>['when']>) => {
  if (!('error' in result)) throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error).toBody();
};

describe('account decider', () => {
  it('opens an organization once', () => {
    expect(spec.given([]).when({ type: 'CreateOrganization', orgId: org_id, name: 'Acme', tier: 'free', now: 1 })).toEqual(
      { events: [created] },
    );
    const again = spec.given([created]).when({ type: 'CreateOrganization', orgId: org_id, name: 'Acme', tier: 'free', now: 2 });
    expect(errorBody(again).error.code).toBe('organization_exists');
  });

  it('refuses commands on an organization that does not exist', () => {
    const result = spec.given([]).when({ type: 'AddCredits', orgId: 'org_x', amountMicros: 5, description: 'x' });
    expect(errorBody(result)).toMatchObject({ error: { code: 'resource_not_found' } });
  });

  it('reserves funds only up to the available balance', () => {
    const given = spec.given([created, credited(1_000_000), reserved('r1', 600_000)]);
    expect(given.when({ type: 'ReserveFunds', orgId: org_id, reservationId: 'r2', amountMicros: 400_000, description: 'video', expiresAt: EXPIRES_AT, now: NOW })).toEqual({
      events: [reserved('r2', 400_000)],
    });
    const refused = given.when({ type: 'ReserveFunds', orgId: org_id, reservationId: 'r2', amountMicros: 400_001, description: 'v', expiresAt: EXPIRES_AT, now: NOW });
    expect(errorBody(refused)).toEqual({
      error: {
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        message: 'Insufficient balance: this request requires $0.400001 but $0.40 is available.',
      },
    });
  });

  it('treats a repeated reservation id as the same reservation', () => {
    expect(
      spec.given([created, credited(1_000_000), reserved('r1', 600_000)]).when({
        type: 'ReserveFunds',
        orgId: org_id,
        reservationId: 'r1',
        amountMicros: 600_000,
        description: 'video',
        expiresAt: EXPIRES_AT, now: NOW,
      }),
    ).toEqual({ events: [] });
  });

  it('captures part of a reservation and gives the rest back', () => {
    expect(
      spec.given([created, credited(1_000_000), reserved('r1', 600_000)]).when({
        type: 'CaptureReservation',
        orgId: org_id,
        reservationId: 'r1',
        amountMicros: 250_000,
      }),
    ).toEqual({
      events: [
        { type: 'ReservationCaptured', data: { org_id, reservation_id: 'r1', amount_micros: 250_000, released_micros: 350_000 } },
      ],
    });
  });

  it('never captures more than was reserved', () => {
    const result = spec
      .given([created, credited(1_000_000), reserved('r1', 600_000)])
      .when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_001 });
    expect(errorBody(result).error.code).toBe('capture_exceeds_reservation');
  });

  it('settles a reservation once: a repeated capture or release changes nothing', () => {
    const captured: AccountEvent = {
      type: 'ReservationCaptured',
      data: { org_id, reservation_id: 'r1', amount_micros: 600_000, released_micros: 0 },
    };
    const given = spec.given([created, credited(1_000_000), reserved('r1', 600_000), captured]);
    expect(given.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000 })).toEqual({ events: [] });
    expect(given.when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'r1' })).toEqual({ events: [] });
    expect(given.when({ type: 'ReserveFunds', orgId: org_id, reservationId: 'r1', amountMicros: 1, description: 'v', expiresAt: EXPIRES_AT, now: NOW })).toEqual({
      events: [],
    });
  });

  it('releases the whole reservation back to the available balance', () => {
    const given = spec.given([
      created,
      credited(1_000_000),
      reserved('r1', 1_000_000),
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'r1', amount_micros: 1_000_000 } },
    ]);
    expect(given.when({ type: 'ReserveFunds', orgId: org_id, reservationId: 'r2', amountMicros: 1_000_000, description: 'v', expiresAt: EXPIRES_AT, now: NOW })).toMatchObject({
      events: [{ type: 'FundsReserved' }],
    });
  });

  it('expires a reservation still open at its expiry, once, and refuses to capture it afterwards', () => {
    const given = spec.given([created, credited(1_000_000), reserved('r1', 600_000)]);
    expect(given.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT - 1 })).toEqual({ events: [] });
    const expired: AccountEvent = {
      type: 'ReservationReleased',
      data: { org_id, reservation_id: 'r1', amount_micros: 600_000, reason: 'expired' },
    };
    expect(given.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT })).toEqual({ events: [expired] });

    const after = spec.given([created, credited(1_000_000), reserved('r1', 600_000), expired]);
    expect(after.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT + 1 })).toEqual({ events: [] });
    expect(after.when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'r1' })).toEqual({ events: [] });
    const capture = after.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 1 });
    expect(errorBody(capture).error).toMatchObject({ code: 'reservation_expired', type: 'invalid_request_error' });
  });

  it('never expires a reservation already captured', () => {
    const given = spec.given([
      created,
      credited(1_000_000),
      reserved('r1', 600_000),
      { type: 'ReservationCaptured', data: { org_id, reservation_id: 'r1', amount_micros: 600_000, released_micros: 0 } },
    ]);
    expect(given.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT + 1 })).toEqual({ events: [] });
  });

  it('remembers a settled reservation until an hour past its expiry, then forgets it', () => {
    const retention = SETTLED_RETENTION_SECONDS;
    const history = [created, credited(1_000_000), reserved('r1', 600_000), capturedAll('r1', 600_000)];
    const within = spec.given([...history, reserved('r2', 1, EXPIRES_AT + retention)]);
    expect(within.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000 })).toEqual({ events: [] });

    const later = spec.given([...history, reserved('r2', 1, EXPIRES_AT + retention + 1)]);
    const capture = later.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000 });
    expect(errorBody(capture).error).toMatchObject({ code: 'resource_not_found' });
  });

  it('keeps the state of a long-lived account the size of its recent work', () => {
    const events: AccountEvent[] = [created, credited(1_000_000_000)];
    // A reservation a minute for 30 days, each captured at once and expiring an hour after it was made.
    for (let minute = 0; minute < 30 * 1_440; minute++) {
      const at = minute * 60;
      events.push(reserved(`r${minute}`, 1, at, at + 3_600), capturedAll(`r${minute}`, 1));
    }
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    if (state.status !== 'open') throw new Error('expected an open account');
    // Those that expired within the last hour, and those still within their hour: two hours of work.
    expect(state.settled.size).toBeLessThanOrEqual(2 * 60 + 1);
    expect(state.balanceMicros).toBe(1_000_000_000 - 30 * 1_440);
  });

  it('comes back from its snapshot as it was, open reservations and settlements in their order', () => {
    const events = [
      created,
      credited(1_000_000),
      reserved('r1', 100_000),
      reserved('r2', 200_000),
      capturedAll('r1', 100_000),
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'r3', amount_micros: 1, reason: 'expired' } } as AccountEvent,
    ];
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    const { snapshot } = accountDecider;
    const restored = snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))));
    expect(restored).toEqual(state);
    if (restored.status !== 'open' || state.status !== 'open') throw new Error('expected open accounts');
    expect([...restored.settled.keys()]).toEqual([...state.settled.keys()]);
    const absent = accountDecider.initialState();
    expect(snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(absent))))).toEqual(absent);
  });

  it('refuses to settle an unknown reservation', () => {
    const result = spec.given([created]).when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'nope' });
    expect(errorBody(result).error.code).toBe('resource_not_found');
  });

  it('changes tier only when it differs', () => {
    expect(spec.given([created]).when({ type: 'UpdateOrganization', orgId: org_id, tier: 'free' })).toEqual({ events: [] });
    expect(spec.given([created]).when({ type: 'UpdateOrganization', orgId: org_id, tier: 'premium' })).toEqual({
      events: [{ type: 'TierChanged', data: { org_id, tier: 'premium' } }],
    });
  });

  describe('custom limits', () => {
    const limits = (custom: Partial<CustomLimits>): AccountEvent => ({
      type: 'OrganizationLimitsChanged',
      data: { org_id, limits: { ...NO_CUSTOM_LIMITS, ...custom } },
    });
    const enterprise: AccountEvent = { type: 'TierChanged', data: { org_id, tier: 'enterprise' } };

    it('sets any subset for an enterprise organization, keeping the figures not named', () => {
      const given = spec.given([created, enterprise, limits({ requests_per_day: 5_000_000 })]);
      expect(given.when({ type: 'UpdateOrganization', orgId: org_id, limits: { requests_per_minute: 3 } })).toEqual({
        events: [limits({ requests_per_minute: 3, requests_per_day: 5_000_000 })],
      });
    });

    it('gives a figure back to the tier with null, and records nothing that changes nothing', () => {
      const given = spec.given([created, enterprise, limits({ requests_per_minute: 3 })]);
      expect(given.when({ type: 'UpdateOrganization', orgId: org_id, limits: { requests_per_minute: null } })).toEqual({
        events: [limits({})],
      });
      expect(given.when({ type: 'UpdateOrganization', orgId: org_id, limits: { requests_per_minute: 3 } })).toEqual({ events: [] });
    });

    it('sets the tier and the limits in one command', () => {
      expect(
        spec.given([created]).when({ type: 'UpdateOrganization', orgId: org_id, tier: 'enterprise', limits: { chat_tokens_per_day: 7 } }),
      ).toEqual({ events: [enterprise, limits({ chat_tokens_per_day: 7 })] });
    });

    it('refuses custom figures for any other tier, naming limits', () => {
      const result = spec.given([created]).when({ type: 'UpdateOrganization', orgId: org_id, limits: { requests_per_minute: 3 } });
      expect(errorBody(result).error).toMatchObject({ code: 'custom_limits_require_enterprise', param: 'limits' });
      const leaving = spec
        .given([created, enterprise])
        .when({ type: 'UpdateOrganization', orgId: org_id, tier: 'premium', limits: { requests_per_minute: 3 } });
      expect(errorBody(leaving).error.code).toBe('custom_limits_require_enterprise');
    });

    it('clears them when the organization leaves enterprise', () => {
      const given = spec.given([created, enterprise, limits({ requests_per_minute: 3, chat_tokens_per_day: 7 })]);
      expect(given.when({ type: 'UpdateOrganization', orgId: org_id, tier: 'premium' })).toEqual({
        events: [{ type: 'TierChanged', data: { org_id, tier: 'premium' } }, limits({})],
      });
    });
  });
});
