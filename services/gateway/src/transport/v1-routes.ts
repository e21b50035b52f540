import { Subjects } from '@oc/contracts';
import { chatRoutes } from './chat-routes';
import type { Route } from './routes';
import { videoRoutes } from './video-routes';
import { webhookRoutes } from './webhook-routes';

/** The public `/v1` surface: health and account here; each service's routes come from its own file. */
export function v1Routes(version: string, now: () => number): Route[] {
  return [
    {
      method: 'GET',
      path: '/v1/health',
      scope: null,
      handle: async () => ({ ok: true, data: { status: 'ok', version, timestamp: new Date(now()).toISOString() } }),
    },
    {
      method: 'GET',
      path: '/v1/account/balance',
      scope: null,
      handle: ({ services, principal, headers }) =>
        services.request(Subjects.billing.getBalance, { org_id: principal.org_id }, { headers }),
    },
    ...chatRoutes(),
    ...videoRoutes(),
    ...webhookRoutes(),
  ];
}
