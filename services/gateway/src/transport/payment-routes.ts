import {
  CheckoutSessionSchema,
  type ConsolePrincipal,
  ListQuery,
  listOf,
  parseOrThrow,
  PaymentSchema,
  Subjects,
  TopUpBody,
  usdToMicros,
} from '@oc/contracts';
import type { Request } from 'express';
import type { ConsoleRoute } from './console-routes';
import type { Route } from './routes';

/** An organization's top-ups paid with Stripe, for operators (and, through the console, its members). */
export function paymentAdminRoutes(): Route<'admin'>[] {
  return [
    {
      method: 'GET',
      path: '/admin/v1/organizations/:org_id/payments',
      scope: null,
      doc: {
        summary: "An organization's top-ups paid with Stripe, newest first: amounts, refunds, disputes, status and receipt",
        query: ListQuery,
        response: listOf(PaymentSchema),
      },
      handle: ({ services, params, query, headers }) =>
        services.request(Subjects.billing.listPayments, { ...parseOrThrow(ListQuery, query), org_id: params.org_id }, { headers }),
    },
  ];
}

/** The console page a member comes back to from Stripe's Checkout, on the host the member is using. */
const billingPage = (req: Request) => `${req.protocol}://${req.get('host') ?? 'localhost'}/dashboard/billing`;

/**
 * `POST /console/v1/top-ups`: a member starts paying for credit on Stripe's Checkout; the answer's `url` is where
 * the browser goes. The credit arrives with Stripe's webhook, not with this answer.
 */
export function topUpRoute(): ConsoleRoute {
  return {
    method: 'POST',
    path: '/console/v1/top-ups',
    scope: null,
    who: 'member',
    doc: {
      summary: "Start a top-up: a Stripe Checkout Session for an amount within the operator's bounds; open its url to pay",
      request: TopUpBody,
      response: CheckoutSessionSchema,
    },
    handle: ({ services, principal, body, headers, req }) => {
      const member = principal as Extract<ConsolePrincipal, { kind: 'member' }>;
      const { amount } = parseOrThrow(TopUpBody, body);
      return services.request(
        Subjects.billing.startTopUp,
        { org_id: member.organization.id, amount_micros: usdToMicros(amount), return_url: billingPage(req as Request) },
        { headers },
      );
    },
  };
}
