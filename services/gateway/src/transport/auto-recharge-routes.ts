import {
  AutoRechargeBody,
  AutoRechargeSchema,
  AutoRechargeValidationCodes,
  type ConsolePrincipal,
  parseOrThrow,
  SetupSessionSchema,
  Subjects,
  usdToMicros,
} from '@oc/contracts';
import type { Request } from 'express';
import type { ConsoleRoute } from './console-routes';

type Member = Extract<ConsolePrincipal, { kind: 'member' }>;

/** The console page a member comes back to from Stripe's Checkout, on the host the member is using. */
const billingPage = (req: Request) => `${req.protocol}://${req.get('host') ?? 'localhost'}/dashboard/billing`;

/**
 * Auto-recharge for a member's organization: its settings and how its attempts went, turning it on or off, and
 * saving the card it charges (Stripe's Checkout in setup mode; the card arrives with Stripe's webhook).
 */
export function autoRechargeRoutes(): ConsoleRoute[] {
  return [
    {
      method: 'GET',
      path: '/console/v1/auto-recharge',
      scope: null,
      who: 'member',
      doc: {
        summary: "The organization's auto-recharge: on or off, threshold and amount, whether a card is saved, the last attempt and its outcome, failures in a row, and why it turned itself off",
        response: AutoRechargeSchema,
      },
      handle: ({ services, principal, headers }) => services.request(Subjects.billing.getAutoRecharge, { org_id: (principal as Member).organization.id }, { headers }),
    },
    {
      method: 'PATCH',
      path: '/console/v1/auto-recharge',
      scope: null,
      who: 'member',
      doc: {
        summary: 'Change auto-recharge (any of enabled, threshold, amount): when available funds fall below threshold (USD), the saved card is charged amount (USD, within the top-up bounds)',
        request: AutoRechargeBody,
        response: AutoRechargeSchema,
      },
      handle: ({ services, principal, body, headers }) => {
        const { enabled, threshold, amount } = parseOrThrow(AutoRechargeBody, body, AutoRechargeValidationCodes);
        return services.request(
          Subjects.billing.configureAutoRecharge,
          {
            org_id: (principal as Member).organization.id,
            ...(enabled !== undefined ? { enabled } : {}),
            ...(threshold !== undefined ? { threshold_micros: usdToMicros(threshold) } : {}),
            ...(amount !== undefined ? { amount_micros: usdToMicros(amount) } : {}),
          },
          { headers },
        );
      },
    },
    {
      method: 'POST',
      path: '/console/v1/auto-recharge/payment-method',
      scope: null,
      who: 'member',
      doc: {
        summary: "Save a card for auto-recharge: a Stripe Checkout Session in setup mode for the organization's Customer; open its url",
        response: SetupSessionSchema,
      },
      handle: ({ services, principal, headers, req }) =>
        services.request(Subjects.billing.startCardSetup, { org_id: (principal as Member).organization.id, return_url: billingPage(req as Request) }, { headers }),
    },
  ];
}
