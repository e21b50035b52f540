import { ApiError, conflict, insufficientFunds, internalError, invalidRequest, notFound } from './errors';
import { type BudgetPeriod, keyBudgetExceeded } from './key-budget';

export type NotFoundResource =
  | 'organization'
  | 'api_key'
  | 'video'
  | 'chat_session'
  | 'response'
  | 'webhook'
  | 'webhook_delivery'
  | 'reservation'
  | 'member';

export type DomainErrorDetail =
  | { kind: 'InsufficientFunds'; requiredMicros: number; availableMicros: number }
  | { kind: 'KeyBudgetExceeded'; keyId: string; period: BudgetPeriod; limitMicros: number; leftMicros: number; requiredMicros: number }
  | { kind: 'NotFound'; resource: NotFoundResource; id: string }
  | { kind: 'Conflict'; code: string; message: string }
  | { kind: 'InvalidState'; code: string; message: string; param?: string };

/** What a pure `decide` throws when a command cannot be carried out. */
export class DomainError extends Error {
  constructor(readonly detail: DomainErrorDetail) {
    super(detail.kind);
    this.name = 'DomainError';
  }
}

const NOT_FOUND_CODE: Record<NotFoundResource, string> = {
  video: 'video_not_found',
  chat_session: 'resource_not_found',
  response: 'resource_not_found',
  organization: 'resource_not_found',
  api_key: 'resource_not_found',
  webhook: 'resource_not_found',
  webhook_delivery: 'resource_not_found',
  reservation: 'resource_not_found',
  member: 'resource_not_found',
};

/** The single mapping from domain errors (and anything unexpected) to the spec's error body. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (!(error instanceof DomainError)) return internalError();
  const d = error.detail;
  switch (d.kind) {
    case 'InsufficientFunds':
      return insufficientFunds(d.requiredMicros, d.availableMicros);
    case 'KeyBudgetExceeded':
      return keyBudgetExceeded(d.keyId, d.period, d.limitMicros, d.leftMicros, d.requiredMicros);
    case 'NotFound':
      return notFound(NOT_FOUND_CODE[d.resource], `No ${d.resource.replace('_', ' ')} found with id '${d.id}'.`);
    case 'Conflict':
      return conflict(d.code, d.message);
    case 'InvalidState':
      return invalidRequest(d.code, d.message, d.param);
    default: {
      const never: never = d;
      return never;
    }
  }
}
