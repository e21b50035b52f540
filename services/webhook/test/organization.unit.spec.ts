import { toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { type OrganizationWebhooksCommand, type OrganizationWebhooksEvent, organizationWebhooksDecider } from '../src/domain/organization';

const spec = deciderSpec(organizationWebhooksDecider);
const add = (webhookId: string, existing: string[] = []): OrganizationWebhooksCommand => ({
  type: 'AddWebhook',
  orgId: 'org_1',
  webhookId,
  max: 3,
  now: 7,
  existing,
});
const added = (webhookId: string): OrganizationWebhooksEvent => ({ type: 'OrganizationWebhookAdded', data: { webhook_id: webhookId, org_id: 'org_1', at: 7 } });
const removed = (webhookId: string): OrganizationWebhooksEvent => ({ type: 'OrganizationWebhookRemoved', data: { webhook_id: webhookId, org_id: 'org_1' } });

describe("an organization's webhooks, counted against its limit", () => {
  it('gives places up to the limit, then refuses with webhook_limit_reached', () => {
    expect(spec.given([]).when(add('wh_1'))).toEqual({ events: [added('wh_1')] });
    const full = spec.given([added('wh_1'), added('wh_2'), added('wh_3')]).when(add('wh_4'));
    expect('error' in full && toApiError(full.error).toBody().error).toMatchObject({ code: 'webhook_limit_reached', type: 'invalid_request_error' });
    expect(toApiError((full as { error: unknown }).error).status).toBe(400);
  });

  it('frees a place when a webhook is removed, and repeats nothing', () => {
    const history = [added('wh_1'), added('wh_2'), added('wh_3'), removed('wh_2')];
    expect(spec.given(history).when(add('wh_4'))).toEqual({ events: [added('wh_4')] });
    expect(spec.given(history).when(add('wh_1'))).toEqual({ events: [] });
    expect(spec.given(history).when({ type: 'RemoveWebhook', orgId: 'org_1', webhookId: 'wh_2' })).toEqual({ events: [] });
  });

  it('counts the webhooks made before the count began, once, on its first use', () => {
    expect(spec.given([]).when(add('wh_9', ['wh_1', 'wh_2']))).toEqual({ events: [added('wh_1'), added('wh_2'), added('wh_9')] });
    expect('error' in spec.given([]).when(add('wh_9', ['wh_1', 'wh_2', 'wh_3']))).toBe(true);
    // Once counted, what the caller read elsewhere no longer matters.
    expect(spec.given([added('wh_1')]).when(add('wh_9', ['wh_1', 'wh_2', 'wh_3']))).toEqual({ events: [added('wh_9')] });
  });
});
