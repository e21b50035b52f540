import type { DomainError } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { apiKeyDecider, type ApiKeyEvent } from '../src/domain/api-key';

const key = { key_id: 'key_1', org_id: 'org_1' };
const created: ApiKeyEvent = {
  type: 'ApiKeyCreated',
  data: {
    ...key,
    name: 'ci',
    mode: 'live',
    prefix: 'sk-live-abcd',
    key_hash: 'a'.repeat(64),
    scopes: ['video:read'],
    rate_limit_per_minute: 60,
    expires_at: null,
    created: 1,
  },
};

describe('api key decider', () => {
  it('comes back from its snapshot as it was, in use or revoked', () => {
    const { snapshot } = apiKeyDecider;
    const used: ApiKeyEvent = { type: 'ApiKeyUsed', data: { ...key, requests: 3, last_used_at: 2 } };
    const revoked: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { ...key, revoked_at: 3 } };
    for (const events of [[created, used], [created, used, revoked]]) {
      const state = events.reduce(apiKeyDecider.evolve, apiKeyDecider.initialState());
      expect(snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))))).toEqual(state);
    }
  });
});

describe('api key decider: changing a key', () => {
  const given = (...events: ApiKeyEvent[]) => events.reduce(apiKeyDecider.evolve, apiKeyDecider.initialState());
  const update = (changes: { name?: string; allowedModels?: string[] | null }, orgId = 'org_1') =>
    ({ type: 'UpdateApiKey', keyId: 'key_1', orgId, now: 5, ...changes }) as const;

  it('records what changed, and nothing when nothing does', () => {
    expect(apiKeyDecider.decide(update({ name: 'prod', allowedModels: ['chat-2'] }), given(created))).toEqual([
      { type: 'ApiKeyUpdated', data: { ...key, name: 'prod', allowed_models: ['chat-2'], updated_at: 5 } },
    ]);
    const limited = given(created, { type: 'ApiKeyUpdated', data: { ...key, allowed_models: ['chat-2'], updated_at: 5 } });
    expect(apiKeyDecider.decide(update({ name: 'ci', allowedModels: ['chat-2'] }), limited)).toEqual([]);
    expect(apiKeyDecider.decide(update({ allowedModels: null }), limited)).toEqual([
      { type: 'ApiKeyUpdated', data: { ...key, allowed_models: null, updated_at: 5 } },
    ]);
    expect(apiKeyDecider.decide(update({ allowedModels: null }), given(created))).toEqual([]);
  });

  it("treats another organization's key as absent and refuses to change a revoked one", () => {
    const refusal = (decide: () => unknown) => {
      try {
        decide();
      } catch (error) {
        return (error as DomainError).detail;
      }
      throw new Error('not refused');
    };
    expect(refusal(() => apiKeyDecider.decide(update({ name: 'x' }, 'org_2'), given(created)))).toMatchObject({ kind: 'NotFound', resource: 'api_key' });
    expect(refusal(() => apiKeyDecider.decide(update({ name: 'x' }), given()))).toMatchObject({ kind: 'NotFound', resource: 'api_key' });
    const revoked = given(created, { type: 'ApiKeyRevoked', data: { ...key, revoked_at: 3 } });
    expect(refusal(() => apiKeyDecider.decide(update({ name: 'x' }), revoked))).toMatchObject({ code: 'api_key_revoked' });
  });
});
