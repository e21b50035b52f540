import { type BillingEvent, DomainError, type Scope, BillingStreams, streamName } from '@oc/contracts';
import { jsonSnapshots } from '@oc/eventstore';

/** One API key (stream `apikey-<key_id>`). Only the SHA-256 of the key is ever stored. */
export type ApiKeyEvent = Extract<BillingEvent, { type: 'ApiKeyCreated' | 'ApiKeyUpdated' | 'ApiKeyRevoked' | 'ApiKeyUsed' }>;

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
      /** Null: every model. */
      allowedModels: string[] | null;
      now: number;
    }
  /** A field left undefined is not changed. */
  | { type: 'UpdateApiKey'; keyId: string; orgId: string; name?: string | undefined; allowedModels?: string[] | null | undefined; now: number }
  | { type: 'RevokeApiKey'; keyId: string; orgId: string; now: number }
  | { type: 'RecordApiKeyUsage'; keyId: string; requests: number; lastUsedAt: number };

export type ApiKeyState =
  | { status: 'absent' }
  /** `name` and `allowedModels` are absent from the states of snapshots taken before keys could change. */
  | { status: 'active' | 'revoked'; keyId: string; orgId: string; name?: string; allowedModels?: string[] | null };

const sameModels = (a: string[] | null, b: string[] | null | undefined) =>
  a === null || b == null ? a === (b ?? null) : a.length === b.length && a.every((m, i) => m === b[i]);

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
            allowed_models: command.allowedModels,
          },
        },
      ];
    case 'UpdateApiKey': {
      if (state.status === 'absent' || state.orgId !== command.orgId) {
        throw new DomainError({ kind: 'NotFound', resource: 'api_key', id: command.keyId });
      }
      if (state.status === 'revoked') {
        throw new DomainError({ kind: 'InvalidState', code: 'api_key_revoked', message: `The API key '${command.keyId}' is revoked; it cannot be changed.` });
      }
      const changes = {
        ...(command.name !== undefined && command.name !== state.name ? { name: command.name } : {}),
        ...(command.allowedModels !== undefined && !sameModels(command.allowedModels, state.allowedModels) ? { allowed_models: command.allowedModels } : {}),
      };
      if (Object.keys(changes).length === 0) return [];
      return [{ type: 'ApiKeyUpdated', data: { key_id: state.keyId, org_id: state.orgId, ...changes, updated_at: command.now } }];
    }
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
      return { status: 'active', keyId: event.data.key_id, orgId: event.data.org_id, name: event.data.name, allowedModels: event.data.allowed_models ?? null };
    case 'ApiKeyUpdated':
      if (state.status === 'absent') return state;
      return {
        ...state,
        ...(event.data.name !== undefined ? { name: event.data.name } : {}),
        ...(event.data.allowed_models !== undefined ? { allowedModels: event.data.allowed_models } : {}),
      };
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
