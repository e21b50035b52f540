import { type BillingEvent, BillingStreams, formatUsd, streamName } from '@oc/contracts';

/**
 * An organization's auto-recharge (stream `autorecharge-<org_id>`): its settings, its Stripe Customer and saved
 * card, and every attempt to charge it. Whether to charge is decided here against the stream's expected revision,
 * so two billing replicas that both find the balance low start one attempt: the second decides on the first's
 * `AutoRechargeStarted` and does nothing. One attempt at a time (nothing new while one is pending), a cool-down
 * between the starts of two attempts, and after `maxFailures` failures in a row it turns itself off.
 */
export type AutoRechargeEvent = Extract<
  BillingEvent,
  {
    type:
      | 'AutoRechargeConfigured'
      | 'AutoRechargeCustomerCreated'
      | 'AutoRechargePaymentMethodSaved'
      | 'AutoRechargeStarted'
      | 'AutoRechargeSucceeded'
      | 'AutoRechargeFailed'
      | 'AutoRechargeDisabled';
  }
>;

export interface AutoRechargePolicy {
  cooldownSeconds: number;
  maxFailures: number;
}

export type AutoRechargeCommand =
  | { type: 'Configure'; orgId: string; enabled: boolean; thresholdMicros: number; amountMicros: number }
  | { type: 'RecordCustomer'; orgId: string; customerId: string }
  | { type: 'SavePaymentMethod'; orgId: string; customerId: string; paymentMethodId: string; setupIntentId: string; now: number }
  /** The organization's available funds as they stand; `now` unix seconds. */
  | { type: 'Observe'; orgId: string; availableMicros: number; now: number; policy: AutoRechargePolicy }
  /** Stripe's answer to the attempt's PaymentIntent, or its webhook: each attempt settles once. */
  | { type: 'Settle'; orgId: string; attemptId: string; paymentId: string | null; outcome: 'succeeded' | 'failed'; message: string; now: number; policy: AutoRechargePolicy }
  /** Reads the state (the console's view, an attempt to resume). */
  | { type: 'Inspect' };

export interface AutoRechargeAttempt {
  attemptId: string;
  amountMicros: number;
  created: number;
  paymentId: string | null;
  outcome: 'pending' | 'succeeded' | 'failed';
  message: string | null;
  settledAt: number | null;
}

export interface AutoRechargeState {
  enabled: boolean;
  thresholdMicros: number | null;
  amountMicros: number | null;
  customerId: string | null;
  paymentMethodId: string | null;
  attempts: number;
  last: AutoRechargeAttempt | null;
  failures: number;
  disabledReason: string | null;
}

export const autoRechargeStream = (orgId: string) => streamName(BillingStreams.autoRecharge, orgId);

/** The idempotency key of an attempt's PaymentIntent, and its id: the organization's n-th attempt. */
export const attemptId = (orgId: string, n: number) => `autorecharge_${orgId}_${n}`;

const initialState = (): AutoRechargeState => ({
  enabled: false,
  thresholdMicros: null,
  amountMicros: null,
  customerId: null,
  paymentMethodId: null,
  attempts: 0,
  last: null,
  failures: 0,
  disabledReason: null,
});

/** Unix seconds before which no attempt starts; null when nothing was attempted. */
export const nextAttemptAfter = (state: AutoRechargeState, policy: AutoRechargePolicy) => (state.last ? state.last.created + policy.cooldownSeconds : null);

function decide(command: AutoRechargeCommand, state: AutoRechargeState): AutoRechargeEvent[] {
  switch (command.type) {
    case 'Inspect':
      return [];
    case 'Configure': {
      const same = state.enabled === command.enabled && state.thresholdMicros === command.thresholdMicros && state.amountMicros === command.amountMicros;
      if (same) return [];
      return [
        {
          type: 'AutoRechargeConfigured',
          data: { org_id: command.orgId, enabled: command.enabled, threshold_micros: command.thresholdMicros, amount_micros: command.amountMicros },
        },
      ];
    }
    case 'RecordCustomer':
      // Two replicas creating the Customer at once get the same one from Stripe (one idempotency key); the first recorded stays.
      if (state.customerId) return [];
      return [{ type: 'AutoRechargeCustomerCreated', data: { org_id: command.orgId, customer_id: command.customerId } }];
    case 'SavePaymentMethod':
      if (state.paymentMethodId === command.paymentMethodId) return [];
      return [
        {
          type: 'AutoRechargePaymentMethodSaved',
          data: {
            org_id: command.orgId,
            customer_id: command.customerId,
            payment_method_id: command.paymentMethodId,
            setup_intent_id: command.setupIntentId,
            saved_at: command.now,
          },
        },
      ];
    case 'Observe': {
      if (!state.enabled || state.paymentMethodId === null || state.thresholdMicros === null || state.amountMicros === null) return [];
      if (command.availableMicros >= state.thresholdMicros) return [];
      if (state.last?.outcome === 'pending') return [];
      const after = nextAttemptAfter(state, command.policy);
      if (after !== null && command.now < after) return [];
      return [
        {
          type: 'AutoRechargeStarted',
          data: {
            org_id: command.orgId,
            attempt_id: attemptId(command.orgId, state.attempts + 1),
            amount_micros: state.amountMicros,
            available_micros: command.availableMicros,
            created: command.now,
          },
        },
      ];
    }
    case 'Settle': {
      if (!state.last || state.last.attemptId !== command.attemptId || state.last.outcome !== 'pending') return [];
      if (command.outcome === 'succeeded') {
        if (command.paymentId === null) return [];
        return [{ type: 'AutoRechargeSucceeded', data: { org_id: command.orgId, attempt_id: command.attemptId, payment_id: command.paymentId, settled_at: command.now } }];
      }
      const events: AutoRechargeEvent[] = [
        {
          type: 'AutoRechargeFailed',
          data: { org_id: command.orgId, attempt_id: command.attemptId, payment_id: command.paymentId, message: command.message, settled_at: command.now },
        },
      ];
      if (state.enabled && state.failures + 1 >= command.policy.maxFailures) {
        events.push({
          type: 'AutoRechargeDisabled',
          data: {
            org_id: command.orgId,
            reason: `Turned off after ${command.policy.maxFailures} failed payments in a row of ${formatUsd(state.last.amountMicros)}; the last: ${command.message} Save a card that can be charged and turn it on again.`,
            disabled_at: command.now,
          },
        });
      }
      return events;
    }
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: AutoRechargeState, event: AutoRechargeEvent): AutoRechargeState {
  switch (event.type) {
    case 'AutoRechargeConfigured':
      // Turning it on again is the member's answer to a stop: failures count afresh.
      return {
        ...state,
        enabled: event.data.enabled,
        thresholdMicros: event.data.threshold_micros,
        amountMicros: event.data.amount_micros,
        ...(event.data.enabled ? { failures: 0, disabledReason: null } : {}),
      };
    case 'AutoRechargeCustomerCreated':
      return { ...state, customerId: event.data.customer_id };
    case 'AutoRechargePaymentMethodSaved':
      return { ...state, customerId: event.data.customer_id, paymentMethodId: event.data.payment_method_id };
    case 'AutoRechargeStarted':
      return {
        ...state,
        attempts: state.attempts + 1,
        last: {
          attemptId: event.data.attempt_id,
          amountMicros: event.data.amount_micros,
          created: event.data.created,
          paymentId: null,
          outcome: 'pending',
          message: null,
          settledAt: null,
        },
      };
    case 'AutoRechargeSucceeded':
      return state.last
        ? { ...state, failures: 0, last: { ...state.last, paymentId: event.data.payment_id, outcome: 'succeeded', settledAt: event.data.settled_at } }
        : state;
    case 'AutoRechargeFailed':
      return state.last
        ? {
            ...state,
            failures: state.failures + 1,
            last: { ...state.last, paymentId: event.data.payment_id, outcome: 'failed', message: event.data.message, settledAt: event.data.settled_at },
          }
        : state;
    case 'AutoRechargeDisabled':
      return { ...state, enabled: false, disabledReason: event.data.reason };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const autoRechargeDecider = { decide, evolve, initialState };
