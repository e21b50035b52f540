import { BalanceSchema, HealthSchema, Subjects } from '@oc/contracts';
import { type ChatRouteOptions, chatRoutes } from './chat-routes';
import type { Route } from './routes';
import { webhookRoutes } from './webhook-routes';
import { videoRoutes } from './video-routes';

/** The public `/v1` surface: health and account here; each service's routes come from its own file. */
export function v1Routes(version: string, now: () => number, chat: ChatRouteOptions = {}): Route[] {
  return [
    {
      method: 'GET',
      path: '/v1/health',
      scope: null,
      doc: { summary: 'Service health and release', response: HealthSchema },
      handle: async () => ({ ok: true, data: { status: 'ok', version, timestamp: new Date(now()).toISOString() } }),
    },
    {
      method: 'GET',
      path: '/v1/account/balance',
      scope: null,
      doc: { summary: "The organization's prepaid balance", response: BalanceSchema },
      handle: ({ services, principal, headers }) =>
        services.request(Subjects.billing.getBalance, { org_id: principal.org_id }, { headers }),
    },
    ...chatRoutes(chat),
    ...videoRoutes(),
    ...webhookRoutes(),
  ];
}
