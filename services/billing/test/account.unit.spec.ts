import { type CustomLimits, DomainError, NO_CUSTOM_LIMITS, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountEvent, REPEAT_WINDOW_SECONDS, SETTLED_RETENTION_SECONDS } from '../src/domain/account';

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
/** As billing records a capture now: with the time of its settlement. */
const capturedAt = (reservation_id: string, amount_micros: number, settled_at: number): AccountEvent => ({
  type: 'ReservationCaptured',
  data: { org_id, reservation_id, amount_micros, released_micros: 0, settled_at },
});
const reserve = (reservationId: string, now = NOW) =>
  ({ type: 'ReserveFunds', orgId: org_id, reservationId, amountMicros: 1, description: 'chat', expiresAt: now + 660, now }) as const;

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
        now: NOW,
      }),
    ).toEqual({
      events: [
        { type: 'ReservationCaptured', data: { org_id, reservation_id: 'r1', amount_micros: 250_000, released_micros: 350_000, settled_at: NOW } },
      ],
    });
  });

  it('never captures more than was reserved', () => {
    const result = spec
      .given([created, credited(1_000_000), reserved('r1', 600_000)])
      .when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_001, now: NOW });
    expect(errorBody(result).error.code).toBe('capture_exceeds_reservation');
  });

  it('settles a reservation once: a repeated capture or release changes nothing', () => {
    const captured: AccountEvent = {
      type: 'ReservationCaptured',
      data: { org_id, reservation_id: 'r1', amount_micros: 600_000, released_micros: 0 },
    };
    const given = spec.given([created, credited(1_000_000), reserved('r1', 600_000), captured]);
    expect(given.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000, now: NOW })).toEqual({ events: [] });
    expect(given.when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'r1', now: NOW })).toEqual({ events: [] });
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
      data: { org_id, reservation_id: 'r1', amount_micros: 600_000, reason: 'expired', settled_at: EXPIRES_AT },
    };
    expect(given.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT })).toEqual({ events: [expired] });

    const after = spec.given([created, credited(1_000_000), reserved('r1', 600_000), expired]);
    expect(after.when({ type: 'ExpireReservation', orgId: org_id, reservationId: 'r1', now: EXPIRES_AT + 1 })).toEqual({ events: [] });
    expect(after.when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'r1', now: NOW })).toEqual({ events: [] });
    const capture = after.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 1, now: NOW });
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
    expect(within.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000, now: NOW })).toEqual({ events: [] });

    const later = spec.given([...history, reserved('r2', 1, EXPIRES_AT + retention + 1)]);
    const capture = later.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r1', amountMicros: 600_000, now: NOW });
    expect(errorBody(capture).error).toMatchObject({ code: 'resource_not_found' });
  });

  it('recognises a captured or released reservation for five minutes after its settlement, then takes its id as new', () => {
    const settledAt = NOW + 30;
    const history = [
      created,
      credited(1_000_000),
      reserved('chatcmpl_1', 1_000),
      reserved('chatcmpl_2', 1_000),
      capturedAt('chatcmpl_1', 1_000, settledAt),
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'chatcmpl_2', amount_micros: 1_000, reason: 'released', settled_at: settledAt } },
    ] satisfies AccountEvent[];
    const within = spec.given([...history, reserved('chatcmpl_3', 1, settledAt + REPEAT_WINDOW_SECONDS)]);
    for (const id of ['chatcmpl_1', 'chatcmpl_2']) {
      expect(within.when({ type: 'CaptureReservation', orgId: org_id, reservationId: id, amountMicros: 1_000, now: NOW })).toEqual({ events: [] });
      expect(within.when({ type: 'ReleaseReservation', orgId: org_id, reservationId: id, now: NOW })).toEqual({ events: [] });
      expect(within.when(reserve(id))).toEqual({ events: [] });
    }
    // Past the window (forgotten by whole minutes): a capture finds nothing, and the id is a new reservation.
    const later = spec.given([...history, reserved('chatcmpl_3', 1, settledAt + REPEAT_WINDOW_SECONDS + 60)]);
    const capture = later.when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'chatcmpl_1', amountMicros: 1_000, now: NOW });
    expect(errorBody(capture).error).toMatchObject({ code: 'resource_not_found' });
    expect(later.when(reserve('chatcmpl_2'))).toMatchObject({ events: [{ type: 'FundsReserved' }] });
  });

  it('refuses to capture an expired reservation until an hour past its expiry, however soon it expired', () => {
    const expired: AccountEvent = {
      type: 'ReservationReleased',
      data: { org_id, reservation_id: 'video_1', amount_micros: 600_000, reason: 'expired', settled_at: EXPIRES_AT },
    };
    const history = [created, credited(1_000_000), reserved('video_1', 600_000), expired];
    const capture = { type: 'CaptureReservation', orgId: org_id, reservationId: 'video_1', amountMicros: 1, now: NOW } as const;
    const within = spec.given([...history, reserved('video_2', 1, EXPIRES_AT + SETTLED_RETENTION_SECONDS)]);
    expect(errorBody(within.when(capture)).error).toMatchObject({ code: 'reservation_expired' });
    const later = spec.given([...history, reserved('video_2', 1, EXPIRES_AT + SETTLED_RETENTION_SECONDS + 1)]);
    expect(errorBody(later.when(capture)).error).toMatchObject({ code: 'resource_not_found' });
  });

  it('never takes a new reservation for a repeat: ids a character apart, under other prefixes, or past 62 prefixes are new', () => {
    const settled = [
      'chatcmpl_AbC123',
      'cmpl_AbC123',
      'AbC123',
      '_AbC123',
      'chatcmpl_',
      'a_b_c',
      ...Array.from({ length: 70 }, (_, i) => `p${i}_AbC123`),
    ];
    const history: AccountEvent[] = [created, credited(1_000_000_000)];
    for (const id of settled) history.push(reserved(id, 1), capturedAt(id, 1, NOW));
    const given = spec.given(history);
    for (const id of settled) expect(given.when(reserve(id))).toEqual({ events: [] });
    const near = [
      'chatcmpl_AbC124',
      'chatcmpl_AbC12',
      'chatcmpl_AbC1234',
      'chatcmpl_abC123',
      'chatcmpl-AbC123',
      'chatcmplAbC123',
      'video_AbC123',
      'AbC12',
      'AbC123_',
      '__AbC123',
      'chatcmpl__',
      'a_b_d',
      'a_bc',
      'p70_AbC123',
      'p69_AbC124',
      'p1_AbC12',
      'AbC123 ',
    ];
    for (const id of near) expect(given.when(reserve(id))).toMatchObject({ events: [{ type: 'FundsReserved' }] });
  });

  it('keeps a busy account the size of its last minutes of work, and recognises all of them, from its snapshot too', () => {
    const events: AccountEvent[] = [created, credited(1_000_000_000)];
    // Fifty completions a second for twenty minutes, each settled the second it was reserved; ids as long as
    // chat's, so that a minute's fill more than one string.
    const id = (second: number, i: number) => `chatcmpl_${String(second).padStart(6, '0')}${String(i).padStart(6, '0')}AbCdEfGhIjKl`;
    for (let second = 0; second < 1_200; second++) {
      for (let i = 0; i < 50; i++) events.push(reserved(id(second, i), 1, second, second + 660), capturedAt(id(second, i), 1, second));
    }
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    if (state.status !== 'open') throw new Error('expected an open account');
    // The window and the minute it is forgotten by.
    expect(state.settled.size).toBeLessThanOrEqual(50 * (REPEAT_WINDOW_SECONDS + 60));
    const { snapshot } = accountDecider;
    const restored = snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))));
    for (const s of [state, restored]) {
      for (let second = 1_200 - REPEAT_WINDOW_SECONDS; second < 1_200; second += 7) {
        for (const i of [0, 17, 49]) expect(accountDecider.decide(reserve(id(second, i), 1_200), s)).toEqual([]);
      }
      expect(accountDecider.decide(reserve(id(0, 0), 1_200), s)).toMatchObject([{ type: 'FundsReserved' }]);
      expect(accountDecider.decide(reserve(id(1_199, 50), 1_200), s)).toMatchObject([{ type: 'FundsReserved' }]);
    }
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

  it('comes back from its snapshot as it was: balance, open reservations, and every settlement recognised as before', () => {
    const settledAt = NOW + 10;
    const events: AccountEvent[] = [
      created,
      credited(1_000_000),
      reserved('r1', 100_000),
      reserved('r2', 200_000),
      reserved('chatcmpl_A1', 1_000),
      reserved('chatcmpl_A2', 1_000),
      reserved('odd id "quoted"', 1_000),
      // Recorded before settlements carried their time.
      capturedAll('r1', 100_000),
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'r3', amount_micros: 1, reason: 'expired' } },
      capturedAt('chatcmpl_A1', 1_000, settledAt),
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'chatcmpl_A2', amount_micros: 1_000, reason: 'released', settled_at: settledAt } },
      { type: 'ReservationReleased', data: { org_id, reservation_id: 'odd id "quoted"', amount_micros: 1_000, reason: 'released', settled_at: settledAt } },
    ];
    const state = events.reduce(accountDecider.evolve, accountDecider.initialState());
    const { snapshot } = accountDecider;
    const restored = snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))));
    if (restored.status !== 'open' || state.status !== 'open') throw new Error('expected open accounts');
    expect({ ...restored, settled: undefined }).toEqual({ ...state, settled: undefined });
    expect(restored.settled.size).toBe(state.settled.size);
    const answer = (s: typeof state, command: Parameters<typeof accountDecider.decide>[0]) => {
      try {
        return accountDecider.decide(command, s);
      } catch (error) {
        return toApiError(error as DomainError).toBody();
      }
    };
    for (const reservationId of ['r1', 'r2', 'r3', 'r4', 'chatcmpl_A1', 'chatcmpl_A2', 'chatcmpl_A3', 'odd id "quoted"']) {
      for (const command of [
        { type: 'ReserveFunds', orgId: org_id, reservationId, amountMicros: 1, description: 'v', expiresAt: EXPIRES_AT, now: NOW + 20 },
        { type: 'CaptureReservation', orgId: org_id, reservationId, amountMicros: 1, now: NOW + 20 },
        { type: 'ReleaseReservation', orgId: org_id, reservationId, now: NOW + 20 },
      ] as const) {
        expect(answer(restored, command)).toEqual(answer(state, command));
      }
    }
    const absent = accountDecider.initialState();
    expect(snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(absent))))).toEqual(absent);
  });

  it('refuses to settle an unknown reservation', () => {
    const result = spec.given([created]).when({ type: 'ReleaseReservation', orgId: org_id, reservationId: 'nope', now: NOW });
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
