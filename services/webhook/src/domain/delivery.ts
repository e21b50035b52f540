import { DomainError, type WebhookDomainEvent, type WebhookEnvelope, WebhookStreams, streamName } from '@oc/contracts';

/**
 * One event on its way to one webhook (stream `delivery-<id>`): the pending attempt and its retry
 * schedule are state here, so a restarted scheduler picks up exactly where the last one stopped.
 * Times are milliseconds since the epoch.
 */
export type DeliveryEvent = Extract<
  WebhookDomainEvent,
  { type: 'DeliveryScheduled' | 'DeliveryAttempted' | 'DeliveryAbandoned' | 'DeliveryRequeued' | 'DeliveryTakenOver' }
>;

/**
 * The delivery's attempts are another replica's to make: the one named in its stream (the replica that
 * scheduled or requeued it, or took it over last). One replica per delivery makes each attempt once.
 */
export class NotDeliveryOwner extends Error {
  constructor(
    readonly deliveryId: string,
    readonly owner: string | null,
  ) {
    super(`Delivery ${deliveryId} is attempted by ${owner === null ? 'no replica yet' : `replica ${owner}`}`);
    this.name = 'NotDeliveryOwner';
  }
}

export interface AttemptOutcome {
  success: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
}

export type DeliveryCommand =
  | {
      type: 'ScheduleDelivery';
      deliveryId: string;
      webhookId: string;
      orgId: string;
      event: WebhookEnvelope;
      now: number;
      /** Delay before each attempt: `[0, 1000, 5000, 25000]` is "at once, then after 1 s, 5 s, 25 s". */
      delays: readonly number[];
      replica: string;
    }
  | { type: 'RecordAttempt'; deliveryId: string; attempt: number; at: number; outcome: AttemptOutcome; delays: readonly number[]; replica: string }
  | { type: 'AbandonDelivery'; deliveryId: string; at: number; reason: 'webhook_inactive' | 'webhook_deleted'; replica: string }
  | { type: 'RequeueDelivery'; deliveryId: string; webhookId: string; orgId: string; now: number; delays: readonly number[]; replica: string }
  /** `replica` makes the attempts from now on, if `from` still did (null: a delivery from before replicas). */
  | { type: 'TakeOverDelivery'; deliveryId: string; replica: string; from: string | null };

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export type DeliveryState =
  | { status: 'absent' }
  | {
      status: DeliveryStatus;
      deliveryId: string;
      webhookId: string;
      orgId: string;
      event: WebhookEnvelope;
      /** Attempts ever made; numbers the next one. */
      attempts: number;
      /** Attempts since the schedule last (re)started; picks the next delay. */
      attemptsThisSchedule: number;
      nextAttemptAt: number | null;
      /** The replica that makes the attempts; null for a delivery from before replicas, until one takes it over. */
      owner: string | null;
    };

export const deliveryStream = (deliveryId: string) => streamName(WebhookStreams.delivery, deliveryId);

function decide(command: DeliveryCommand, state: DeliveryState): DeliveryEvent[] {
  switch (command.type) {
    case 'ScheduleDelivery':
      // The same event reaching the consumer twice must not be delivered as two deliveries.
      if (state.status !== 'absent') return [];
      return [
        {
          type: 'DeliveryScheduled',
          data: {
            delivery_id: command.deliveryId,
            webhook_id: command.webhookId,
            org_id: command.orgId,
            event: command.event,
            next_attempt_at: command.now + (command.delays[0] ?? 0),
            replica: command.replica,
          },
        },
      ];
    case 'RecordAttempt': {
      // A repeat of an attempt already recorded (a retried write) changes nothing.
      if (state.status !== 'pending' || command.attempt !== state.attempts + 1) return [];
      if (state.owner !== command.replica) throw new NotDeliveryOwner(state.deliveryId, state.owner);
      const { outcome } = command;
      const nextDelay = command.delays[state.attemptsThisSchedule + 1];
      return [
        {
          type: 'DeliveryAttempted',
          data: {
            delivery_id: state.deliveryId,
            webhook_id: state.webhookId,
            org_id: state.orgId,
            attempt: command.attempt,
            at: command.at,
            success: outcome.success,
            status_code: outcome.statusCode,
            duration_ms: outcome.durationMs,
            error: outcome.error,
            response_body: outcome.responseBody,
            next_attempt_at: outcome.success || nextDelay === undefined ? null : command.at + nextDelay,
          },
        },
      ];
    }
    case 'AbandonDelivery':
      if (state.status !== 'pending') return [];
      if (state.owner !== command.replica) throw new NotDeliveryOwner(state.deliveryId, state.owner);
      return [
        {
          type: 'DeliveryAbandoned',
          data: { delivery_id: state.deliveryId, webhook_id: state.webhookId, org_id: state.orgId, at: command.at, reason: command.reason },
        },
      ];
    case 'RequeueDelivery':
      if (state.status === 'absent' || state.orgId !== command.orgId || state.webhookId !== command.webhookId) {
        throw new DomainError({ kind: 'NotFound', resource: 'webhook_delivery', id: command.deliveryId });
      }
      if (state.status !== 'failed') {
        throw new DomainError({
          kind: 'InvalidState',
          code: 'delivery_not_failed',
          message: `Delivery '${command.deliveryId}' is ${state.status}; only a failed delivery can be retried.`,
          param: 'delivery_id',
        });
      }
      return [
        {
          type: 'DeliveryRequeued',
          data: {
            delivery_id: state.deliveryId,
            webhook_id: state.webhookId,
            org_id: state.orgId,
            next_attempt_at: command.now + (command.delays[0] ?? 0),
            replica: command.replica,
          },
        },
      ];
    case 'TakeOverDelivery':
      if (state.status !== 'pending' || state.owner !== command.from || command.replica === state.owner) return [];
      return [
        {
          type: 'DeliveryTakenOver',
          data: { delivery_id: state.deliveryId, webhook_id: state.webhookId, org_id: state.orgId, replica: command.replica, previous: state.owner },
        },
      ];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: DeliveryState, event: DeliveryEvent): DeliveryState {
  if (event.type === 'DeliveryScheduled') {
    return {
      status: 'pending',
      deliveryId: event.data.delivery_id,
      webhookId: event.data.webhook_id,
      orgId: event.data.org_id,
      event: event.data.event,
      attempts: 0,
      attemptsThisSchedule: 0,
      nextAttemptAt: event.data.next_attempt_at,
      owner: event.data.replica ?? null,
    };
  }
  if (state.status === 'absent') return state;
  switch (event.type) {
    case 'DeliveryAttempted':
      return {
        ...state,
        status: event.data.success ? 'succeeded' : event.data.next_attempt_at === null ? 'failed' : 'pending',
        attempts: event.data.attempt,
        attemptsThisSchedule: state.attemptsThisSchedule + 1,
        nextAttemptAt: event.data.next_attempt_at,
      };
    case 'DeliveryAbandoned':
      return { ...state, status: 'failed', nextAttemptAt: null };
    case 'DeliveryRequeued':
      return {
        ...state,
        status: 'pending',
        attemptsThisSchedule: 0,
        nextAttemptAt: event.data.next_attempt_at,
        owner: event.data.replica ?? state.owner,
      };
    case 'DeliveryTakenOver':
      return { ...state, owner: event.data.replica };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const deliveryDecider = { decide, evolve, initialState: (): DeliveryState => ({ status: 'absent' }) };
