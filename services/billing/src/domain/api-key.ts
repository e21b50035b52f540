import { type BillingEvent, DomainError, type Scope, BillingStreams, streamName } from '@oc/contracts';
import { jsonSnapshots } from '@oc/eventstore';

/** One API key (stream `apikey-<key_id>`). Only the SHA-256 of the key is ever stored. */
export type ApiKeyEvent = Extract<BillingEvent, { type: 'ApiKeyCreated' | 'ApiKeyRevoked' | 'ApiKeyUsed' }>;

export type ApiKeyCommand =
  | {
      type: 'CreateApiKey';
      keyId: string;
      orgId: string;
      name: string;
      mode: 'live' | 'test';
      prefix: string;
      keyHash: string;
      scopes: Scope[];
      rateLimitPerMinute: number;
      expiresAt: number | null;
      now: number;
    }
  | { type: 'RevokeApiKey'; keyId: string; orgId: string; now: number }
  | { type: 'RecordApiKeyUsage'; keyId: string; requests: number; lastUsedAt: number };

export type ApiKeyState =
  | { status: 'absent' }
  | { status: 'active' | 'revoked'; keyId: string; orgId: string };

export const apiKeyStream = (keyId: string) => streamName(BillingStreams.apiKey, keyId);

function decide(command: ApiKeyCommand, state: ApiKeyState): ApiKeyEvent[] {
  switch (command.type) {
    case 'CreateApiKey':
      if (state.status !== 'absent') {
        throw new DomainError({ kind: 'Conflict', code: 'api_key_exists', message: 'The API key already exists.' });
      }
      return [
        {
          type: 'ApiKeyCreated',
          data: {
            key_id: command.keyId,
            org_id: command.orgId,
            name: command.name,
            mode: command.mode,
            prefix: command.prefix,
            key_hash: command.keyHash,
            scopes: command.scopes,
            rate_limit_per_minute: command.rateLimitPerMinute,
            expires_at: command.expiresAt,
            created: command.now,
          },
        },
      ];
    case 'RevokeApiKey':
      // Another organization's key is as absent as a key that never existed.
      if (state.status === 'absent' || state.orgId !== command.orgId) {
        throw new DomainError({ kind: 'NotFound', resource: 'api_key', id: command.keyId });
      }
      if (state.status === 'revoked') return [];
      return [{ type: 'ApiKeyRevoked', data: { key_id: state.keyId, org_id: state.orgId, revoked_at: command.now } }];
    case 'RecordApiKeyUsage':
      if (state.status === 'absent') return [];
      return [
        {
          type: 'ApiKeyUsed',
          data: { key_id: state.keyId, org_id: state.orgId, requests: command.requests, last_used_at: command.lastUsedAt },
        },
      ];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: ApiKeyState, event: ApiKeyEvent): ApiKeyState {
  switch (event.type) {
    case 'ApiKeyCreated':
      return { status: 'active', keyId: event.data.key_id, orgId: event.data.org_id };
    case 'ApiKeyRevoked':
      return state.status === 'absent' ? state : { ...state, status: 'revoked' };
    case 'ApiKeyUsed':
      return state;
    default: {
      const never: never = event;
      return never;
    }
  }
}

/** A key in use records its usage every few seconds, so its stream grows for as long as it is used. */
export const apiKeyDecider = { decide, evolve, initialState: (): ApiKeyState => ({ status: 'absent' }), snapshot: jsonSnapshots<ApiKeyState>(1, 10_000) };
