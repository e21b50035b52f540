import { DomainError, toApiError, type WebhookEnvelope } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { type AttemptOutcome, deliveryDecider, type DeliveryEvent, NotDeliveryOwner } from '../src/domain/delivery';

const spec = deciderSpec(deliveryDecider);
const delays = [0, 1_000, 5_000, 25_000];
const ref = { delivery_id: 'dlv_1', webhook_id: 'wh_1', org_id: 'org_1' };
const envelope: WebhookEnvelope = {
  id: 'evt_1',
  type: 'video.completed',
  created: 1,
  data: { id: 'video_1', object: 'video', created: 1, model: 'video-2', prompt: 'a cat', status: 'completed', progress: 100, url: 'https://x' },
};
/** The replica that consumed the event and makes the attempts. */
const R = 'webhook-a';
const scheduled: DeliveryEvent = { type: 'DeliveryScheduled', data: { ...ref, event: envelope, next_attempt_at: 1_000, replica: R } };
const failure: AttemptOutcome = { success: false, statusCode: 500, durationMs: 3, error: 'HTTP 500', responseBody: 'oops' };
const success: AttemptOutcome = { success: true, statusCode: 204, durationMs: 2, error: null, responseBody: '' };

const attempted = (attempt: number, at: number, outcome: AttemptOutcome, next: number | null): DeliveryEvent => ({
  type: 'DeliveryAttempted',
  data: {
    ...ref,
    attempt,
    at,
    success: outcome.success,
    status_code: outcome.statusCode,
    duration_ms: outcome.durationMs,
    error: outcome.error,
    response_body: outcome.responseBody,
    next_attempt_at: next,
  },
});
const record = (attempt: number, at: number, outcome: AttemptOutcome) =>
  ({ type: 'RecordAttempt', deliveryId: 'dlv_1', attempt, at, outcome, delays, replica: R }) as const;

describe('delivery decider', () => {
  it('schedules the first attempt at once, and only once per event and webhook', () => {
    const command = { type: 'ScheduleDelivery', deliveryId: 'dlv_1', webhookId: 'wh_1', orgId: 'org_1', event: envelope, now: 1_000, delays, replica: R } as const;
    expect(spec.given([]).when(command)).toEqual({ events: [scheduled] });
    expect(spec.given([scheduled]).when(command)).toEqual({ events: [] });
  });

  it('retries after 1 s, 5 s and 25 s, and marks the delivery failed when the 4th attempt fails', () => {
    const history: DeliveryEvent[] = [scheduled];
    const times = [1_000, 2_000, 7_000, 32_000];
    const expectedNext = [2_000, 7_000, 32_000, null];
    times.forEach((at, i) => {
      const result = spec.given(history).when(record(i + 1, at, failure));
      expect(result).toEqual({ events: [attempted(i + 1, at, failure, expectedNext[i]!)] });
      history.push(...(result as { events: DeliveryEvent[] }).events);
    });
    const state = history.reduce(deliveryDecider.evolve, deliveryDecider.initialState());
    expect(state).toMatchObject({ status: 'failed', attempts: 4, nextAttemptAt: null });
    expect(spec.given(history).when(record(5, 40_000, failure))).toEqual({ events: [] });
  });

  it('stops at the first success', () => {
    const history = [scheduled, attempted(1, 1_000, failure, 2_000)];
    expect(spec.given(history).when(record(2, 2_000, success))).toEqual({ events: [attempted(2, 2_000, success, null)] });
    const state = [...history, attempted(2, 2_000, success, null)].reduce(deliveryDecider.evolve, deliveryDecider.initialState());
    expect(state).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('records an attempt once, even when the same record is written again', () => {
    expect(spec.given([scheduled, attempted(1, 1_000, failure, 2_000)]).when(record(1, 1_000, failure))).toEqual({ events: [] });
  });

  it('abandons a pending delivery whose webhook is inactive', () => {
    expect(spec.given([scheduled]).when({ type: 'AbandonDelivery', deliveryId: 'dlv_1', at: 5, reason: 'webhook_inactive', replica: R })).toEqual({
      events: [{ type: 'DeliveryAbandoned', data: { ...ref, at: 5, reason: 'webhook_inactive' } }],
    });
  });

  it('lets a delivery abandoned while its webhook was disabled be requeued, its attempts counting on', () => {
    const abandoned: DeliveryEvent = { type: 'DeliveryAbandoned', data: { ...ref, at: 1_500, reason: 'webhook_inactive' } };
    const history = [scheduled, attempted(1, 1_000, failure, 2_000), abandoned];
    expect(history.reduce(deliveryDecider.evolve, deliveryDecider.initialState())).toMatchObject({ status: 'failed', nextAttemptAt: null });
    // Not attempted again on its own: the retry that was due is not recorded.
    expect(spec.given(history).when(record(2, 2_000, failure))).toEqual({ events: [] });
    const requeued: DeliveryEvent = { type: 'DeliveryRequeued', data: { ...ref, next_attempt_at: 9_000, replica: R } };
    expect(
      spec.given(history).when({ type: 'RequeueDelivery', deliveryId: 'dlv_1', webhookId: 'wh_1', orgId: 'org_1', now: 9_000, delays, replica: R }),
    ).toEqual({ events: [requeued] });
    expect(spec.given([...history, requeued]).when(record(2, 9_000, success))).toEqual({ events: [attempted(2, 9_000, success, null)] });
  });

  it('requeues only a failed delivery, with a fresh schedule and the same event', () => {
    const failedHistory = [
      scheduled,
      attempted(1, 1_000, failure, 2_000),
      attempted(2, 2_000, failure, 7_000),
      attempted(3, 7_000, failure, 32_000),
      attempted(4, 32_000, failure, null),
    ];
    const requeue = { type: 'RequeueDelivery', deliveryId: 'dlv_1', webhookId: 'wh_1', orgId: 'org_1', now: 100_000, delays, replica: R } as const;
    const requeued: DeliveryEvent = { type: 'DeliveryRequeued', data: { ...ref, next_attempt_at: 100_000, replica: R } };
    expect(spec.given(failedHistory).when(requeue)).toEqual({ events: [requeued] });
    // Attempt numbers go on (5, 6 …) while the delays start again from the beginning.
    expect(spec.given([...failedHistory, requeued]).when(record(5, 100_000, failure))).toEqual({
      events: [attempted(5, 100_000, failure, 101_000)],
    });

    const pending = spec.given([scheduled]).when(requeue);
    if (!('error' in pending)) throw new Error('expected an error');
    expect(toApiError(pending.error).toBody().error).toMatchObject({ code: 'delivery_not_failed', param: 'delivery_id' });
    const foreign = spec.given(failedHistory).when({ ...requeue, orgId: 'org_2' });
    expect('error' in foreign && foreign.error instanceof DomainError && toApiError(foreign.error).status).toBe(404);
  });

  it('records attempts only from the replica that owns the delivery, and hands it over once', () => {
    const elsewhere = spec.given([scheduled]).when({ ...record(1, 1_000, failure), replica: 'webhook-b' });
    expect('error' in elsewhere && elsewhere.error).toBeInstanceOf(NotDeliveryOwner);
    const takeover = { type: 'TakeOverDelivery', deliveryId: 'dlv_1', replica: 'webhook-b', from: R } as const;
    const taken: DeliveryEvent = { type: 'DeliveryTakenOver', data: { ...ref, replica: 'webhook-b', previous: R } };
    expect(spec.given([scheduled]).when(takeover)).toEqual({ events: [taken] });
    // A second replica that also saw webhook-a gone, deciding after the first: nothing.
    expect(spec.given([scheduled, taken]).when({ ...takeover, replica: 'webhook-c' })).toEqual({ events: [] });
    expect(spec.given([scheduled, taken]).when({ ...record(1, 1_000, failure), replica: 'webhook-b' })).toEqual({
      events: [attempted(1, 1_000, failure, 2_000)],
    });
    const former = spec.given([scheduled, taken]).when(record(1, 1_000, failure));
    expect('error' in former && former.error).toBeInstanceOf(NotDeliveryOwner);
    // Nothing to take over once it is no longer pending.
    expect(spec.given([scheduled, attempted(1, 1_000, success, null)]).when(takeover)).toEqual({ events: [] });
  });

  it('lets a replica take over a delivery written before replicas, which names no owner', () => {
    const { replica: _, ...legacy } = (scheduled as Extract<DeliveryEvent, { type: 'DeliveryScheduled' }>).data;
    const old: DeliveryEvent = { type: 'DeliveryScheduled', data: legacy };
    expect('error' in spec.given([old]).when(record(1, 1_000, failure))).toBe(true);
    expect(spec.given([old]).when({ type: 'TakeOverDelivery', deliveryId: 'dlv_1', replica: R, from: null })).toEqual({
      events: [{ type: 'DeliveryTakenOver', data: { ...ref, replica: R, previous: null } }],
    });
  });
});
