import { DomainError, type WebhookDomainEvent, type WebhookEventType, WebhookStreams, streamName } from '@oc/contracts';
import { jsonSnapshots } from '@oc/eventstore';

/** One webhook endpoint of an organization (stream `webhook-<id>`). Its secret is only ever held sealed. */
export type WebhookEvent = Extract<
  WebhookDomainEvent,
  {
    type:
      | 'WebhookCreated'
      | 'WebhookUpdated'
      | 'WebhookEnabled'
      | 'WebhookDisabled'
      | 'WebhookDeleted'
      | 'WebhookSecretRotated'
      | 'WebhookAttemptSucceeded'
      | 'WebhookAttemptFailed';
  }
>;

export type WebhookCommand =
  | {
      type: 'CreateWebhook';
      webhookId: string;
      orgId: string;
      url: string;
      events: WebhookEventType[];
      description: string;
      sealedSecret: string;
      now: number;
    }
  | {
      type: 'UpdateWebhook';
      webhookId: string;
      orgId: string;
      url?: string | undefined;
      events?: WebhookEventType[] | undefined;
      description?: string | undefined;
      isActive?: boolean | undefined;
    }
  | { type: 'DeleteWebhook'; webhookId: string; orgId: string; now: number }
  | { type: 'RotateSecret'; webhookId: string; orgId: string; sealedSecret: string; previousSecretExpiresAt: number }
  /** The outcome of one delivery attempt (test deliveries are not recorded). */
  | { type: 'RecordAttempt'; webhookId: string; success: boolean; at: number; disableAfterFailures: number };

export interface Webhook {
  webhookId: string;
  orgId: string;
  url: string;
  events: WebhookEventType[];
  description: string;
  isActive: boolean;
  created: number;
  sealedSecret: string;
  previousSealedSecret: string | null;
  previousSecretExpiresAt: number | null;
  lastSuccessAt: number | null;
  lastFailureAt: number | null;
  failureCount: number;
}

export type WebhookState = { status: 'absent' } | ({ status: 'present' | 'deleted' } & Webhook);

export const webhookStream = (webhookId: string) => streamName(WebhookStreams.webhook, webhookId);

const notFound = (id: string) => new DomainError({ kind: 'NotFound', resource: 'webhook', id });

function decide(command: WebhookCommand, state: WebhookState): WebhookEvent[] {
  switch (command.type) {
    case 'CreateWebhook':
      if (state.status !== 'absent') {
        throw new DomainError({ kind: 'Conflict', code: 'webhook_exists', message: 'The webhook already exists.' });
      }
      return [
        {
          type: 'WebhookCreated',
          data: {
            webhook_id: command.webhookId,
            org_id: command.orgId,
            url: command.url,
            events: command.events,
            description: command.description,
            secret: command.sealedSecret,
            created: command.now,
          },
        },
      ];
    case 'UpdateWebhook': {
      // Another organization's webhook is as absent as one that never existed.
      if (state.status !== 'present' || state.orgId !== command.orgId) throw notFound(command.webhookId);
      const ref = { webhook_id: state.webhookId, org_id: state.orgId };
      const out: WebhookEvent[] = [];
      const changed = {
        ...(command.url !== undefined && command.url !== state.url ? { url: command.url } : {}),
        ...(command.events !== undefined && !sameSet(command.events, state.events) ? { events: command.events } : {}),
        ...(command.description !== undefined && command.description !== state.description
          ? { description: command.description }
          : {}),
      };
      if (Object.keys(changed).length > 0) out.push({ type: 'WebhookUpdated', data: { ...ref, ...changed } });
      if (command.isActive === true && !state.isActive) out.push({ type: 'WebhookEnabled', data: ref });
      if (command.isActive === false && state.isActive) out.push({ type: 'WebhookDisabled', data: { ...ref, reason: 'owner' } });
      return out;
    }
    case 'DeleteWebhook':
      if (state.status !== 'present' || state.orgId !== command.orgId) throw notFound(command.webhookId);
      return [{ type: 'WebhookDeleted', data: { webhook_id: state.webhookId, org_id: state.orgId, deleted: command.now } }];
    case 'RotateSecret':
      if (state.status !== 'present' || state.orgId !== command.orgId) throw notFound(command.webhookId);
      return [
        {
          type: 'WebhookSecretRotated',
          data: {
            webhook_id: state.webhookId,
            org_id: state.orgId,
            secret: command.sealedSecret,
            previous_secret: state.sealedSecret,
            previous_secret_expires_at: command.previousSecretExpiresAt,
          },
        },
      ];
    case 'RecordAttempt': {
      if (state.status !== 'present') return [];
      const ref = { webhook_id: state.webhookId, org_id: state.orgId };
      if (command.success) {
        // Another success in the same second as the last one, with no failure since, changes nothing.
        if (state.failureCount === 0 && state.lastSuccessAt === command.at) return [];
        return [{ type: 'WebhookAttemptSucceeded', data: { ...ref, at: command.at } }];
      }
      const failed: WebhookEvent = { type: 'WebhookAttemptFailed', data: { ...ref, at: command.at } };
      const disable = state.isActive && state.failureCount + 1 >= command.disableAfterFailures;
      return disable ? [failed, { type: 'WebhookDisabled', data: { ...ref, reason: 'consecutive_failures' } }] : [failed];
    }
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: WebhookState, event: WebhookEvent): WebhookState {
  if (event.type === 'WebhookCreated') {
    const d = event.data;
    return {
      status: 'present',
      webhookId: d.webhook_id,
      orgId: d.org_id,
      url: d.url,
      events: d.events,
      description: d.description,
      isActive: true,
      created: d.created,
      sealedSecret: d.secret,
      previousSealedSecret: null,
      previousSecretExpiresAt: null,
      lastSuccessAt: null,
      lastFailureAt: null,
      failureCount: 0,
    };
  }
  if (state.status === 'absent') return state;
  switch (event.type) {
    case 'WebhookUpdated':
      return {
        ...state,
        ...(event.data.url !== undefined ? { url: event.data.url } : {}),
        ...(event.data.events !== undefined ? { events: event.data.events } : {}),
        ...(event.data.description !== undefined ? { description: event.data.description } : {}),
      };
    case 'WebhookEnabled':
      return { ...state, isActive: true, failureCount: 0 };
    case 'WebhookDisabled':
      return { ...state, isActive: false };
    case 'WebhookDeleted':
      return { ...state, status: 'deleted', isActive: false };
    case 'WebhookSecretRotated':
      return {
        ...state,
        sealedSecret: event.data.secret,
        previousSealedSecret: event.data.previous_secret,
        previousSecretExpiresAt: event.data.previous_secret_expires_at,
      };
    case 'WebhookAttemptSucceeded':
      return { ...state, lastSuccessAt: event.data.at, failureCount: 0 };
    case 'WebhookAttemptFailed':
      return { ...state, lastFailureAt: event.data.at, failureCount: state.failureCount + 1 };
    default: {
      const never: never = event;
      return never;
    }
  }
}

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x));

/** A busy endpoint's stream records an outcome up to every second, so it grows for as long as it is in use. */
export const webhookDecider = { decide, evolve, initialState: (): WebhookState => ({ status: 'absent' }), snapshot: jsonSnapshots<WebhookState>(1, 10_000) };
