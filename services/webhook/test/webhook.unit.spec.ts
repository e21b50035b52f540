import { DomainError, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { type WebhookCommand, webhookDecider, type WebhookEvent } from '../src/domain/webhook';

const spec = deciderSpec(webhookDecider);
const ref = { webhook_id: 'wh_1', org_id: 'org_1' };
const created: WebhookEvent = {
  type: 'WebhookCreated',
  data: { ...ref, url: 'https://example.com/hook', events: ['video.completed'], description: '', secret: 'sealed-1', created: 1 },
};
const failed = (at: number): WebhookEvent => ({ type: 'WebhookAttemptFailed', data: { ...ref, at } });
const attempt = (success: boolean, at = 100) =>
  ({ type: 'RecordAttempt', webhookId: 'wh_1', success, at, disableAfterFailures: 10 }) as const;

const errorOf = (result: { events: WebhookEvent[] } | { error: unknown }) => {
  if (!('error' in result)) throw new Error(`expected an error, got ${JSON.stringify(result)}`);
  expect(result.error).toBeInstanceOf(DomainError);
  return toApiError(result.error);
};

describe('webhook decider', () => {
  it('creates a webhook once', () => {
    const command: WebhookCommand = {
      type: 'CreateWebhook',
      webhookId: 'wh_1',
      orgId: 'org_1',
      url: 'https://example.com/hook',
      events: ['video.completed'],
      description: '',
      sealedSecret: 'sealed-1',
      now: 1,
    };
    expect(spec.given([]).when(command)).toEqual({ events: [created] });
    expect(errorOf(spec.given([created]).when(command)).status).toBe(409);
  });

  it("treats another organization's webhook as absent", () => {
    const result = spec.given([created]).when({ type: 'UpdateWebhook', webhookId: 'wh_1', orgId: 'org_2', isActive: false });
    expect(errorOf(result).toBody()).toEqual({
      error: { type: 'invalid_request_error', code: 'resource_not_found', message: "No webhook found with id 'wh_1'." },
    });
    expect(errorOf(spec.given([created]).when({ type: 'DeleteWebhook', webhookId: 'wh_1', orgId: 'org_2', now: 2 })).status).toBe(404);
  });

  it('records only what an update changes', () => {
    const given = spec.given([created]);
    expect(given.when({ type: 'UpdateWebhook', webhookId: 'wh_1', orgId: 'org_1', events: ['video.completed'], isActive: true })).toEqual({
      events: [],
    });
    expect(
      given.when({ type: 'UpdateWebhook', webhookId: 'wh_1', orgId: 'org_1', events: ['video.failed', 'video.completed'], isActive: false }),
    ).toEqual({
      events: [
        { type: 'WebhookUpdated', data: { ...ref, events: ['video.failed', 'video.completed'] } },
        { type: 'WebhookDisabled', data: { ...ref, reason: 'owner' } },
      ],
    });
  });

  it('disables the webhook on the 10th consecutive failed attempt, not before', () => {
    const nine = Array.from({ length: 9 }, (_, i) => failed(i));
    expect(spec.given([created, ...nine.slice(0, 8)]).when(attempt(false))).toEqual({ events: [failed(100)] });
    expect(spec.given([created, ...nine]).when(attempt(false))).toEqual({
      events: [failed(100), { type: 'WebhookDisabled', data: { ...ref, reason: 'consecutive_failures' } }],
    });
  });

  it('counts consecutive failures: a success in between starts the count again', () => {
    const succeeded: WebhookEvent = { type: 'WebhookAttemptSucceeded', data: { ...ref, at: 50 } };
    const history = [created, ...Array.from({ length: 9 }, (_, i) => failed(i)), succeeded, ...Array.from({ length: 8 }, (_, i) => failed(60 + i))];
    expect(spec.given(history).when(attempt(false))).toEqual({ events: [failed(100)] });
  });

  it('records a success only when it changes something: another in the same second after a success is no event', () => {
    const succeeded = (at: number): WebhookEvent => ({ type: 'WebhookAttemptSucceeded', data: { ...ref, at } });
    expect(spec.given([created]).when(attempt(true, 100))).toEqual({ events: [succeeded(100)] });
    expect(spec.given([created, succeeded(100)]).when(attempt(true, 100))).toEqual({ events: [] });
    expect(spec.given([created, succeeded(100)]).when(attempt(true, 101))).toEqual({ events: [succeeded(101)] });
    expect(spec.given([created, succeeded(100), failed(100)]).when(attempt(true, 100))).toEqual({ events: [succeeded(100)] });
  });

  it('re-enabling resets the failure count, so 10 more failures are needed to disable again', () => {
    const disabled: WebhookEvent = { type: 'WebhookDisabled', data: { ...ref, reason: 'consecutive_failures' } };
    const enabled: WebhookEvent = { type: 'WebhookEnabled', data: ref };
    const tenFailures = Array.from({ length: 10 }, (_, i) => failed(i));
    const given = [created, ...tenFailures, disabled];
    expect(spec.given(given).when({ type: 'UpdateWebhook', webhookId: 'wh_1', orgId: 'org_1', isActive: true })).toEqual({ events: [enabled] });
    expect(spec.given([...given, enabled]).when(attempt(false))).toEqual({ events: [failed(100)] });
    const state = [...given, enabled].reduce(webhookDecider.evolve, webhookDecider.initialState());
    expect(state).toMatchObject({ isActive: true, failureCount: 0 });
  });

  it('keeps the previous secret with its expiry on rotation', () => {
    const result = spec
      .given([created])
      .when({ type: 'RotateSecret', webhookId: 'wh_1', orgId: 'org_1', sealedSecret: 'sealed-2', previousSecretExpiresAt: 86_401 });
    expect(result).toEqual({
      events: [
        { type: 'WebhookSecretRotated', data: { ...ref, secret: 'sealed-2', previous_secret: 'sealed-1', previous_secret_expires_at: 86_401 } },
      ],
    });
  });

  it('ignores attempt outcomes once the webhook is deleted', () => {
    const deleted: WebhookEvent = { type: 'WebhookDeleted', data: { ...ref, deleted: 5 } };
    expect(spec.given([created, deleted]).when(attempt(false))).toEqual({ events: [] });
    expect(errorOf(spec.given([created, deleted]).when({ type: 'DeleteWebhook', webhookId: 'wh_1', orgId: 'org_1', now: 6 })).status).toBe(404);
  });

  it('comes back from its snapshot as it was (its state is plain JSON)', () => {
    const events: WebhookEvent[] = [
      created,
      { type: 'WebhookUpdated', data: { ...ref, events: ['video.failed', 'video.completed'], description: 'prod' } },
      { type: 'WebhookSecretRotated', data: { ...ref, secret: 'sealed-2', previous_secret: 'sealed-1', previous_secret_expires_at: 86_401 } },
      failed(7),
      { type: 'WebhookAttemptSucceeded', data: { ...ref, at: 9 } },
      failed(11),
    ];
    const state = events.reduce(webhookDecider.evolve, webhookDecider.initialState());
    const { snapshot } = webhookDecider;
    expect(snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))))).toEqual(state);
  });
});
