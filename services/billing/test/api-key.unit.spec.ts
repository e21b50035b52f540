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
