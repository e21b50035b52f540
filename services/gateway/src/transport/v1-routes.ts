import { BalanceSchema, HealthSchema, type Model, MODELS, ModelListSchema, ModelSchema, notFound, Subjects } from '@oc/contracts';
import { type ChatRouteOptions, chatRoutes } from './chat-routes';
import type { Route } from './routes';
import type { EventStreamOptions } from './event-stream-routes';
import { webhookRoutes } from './webhook-routes';
import { videoRoutes } from './video-routes';

/** The public `/v1` surface: health, account and models here; each service's routes come from its own file. */
/** `models`: the spec's and the operator's own (MODELS_FILE), as `modelsServed` lists them. */
export function v1Routes(
  version: string,
  now: () => number,
  chat: ChatRouteOptions = {},
  events: EventStreamOptions = {},
  models: readonly Model[] = MODELS,
): Route[] {
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
    {
      method: 'GET',
      path: '/v1/models',
      scope: null,
      doc: { summary: "The models this API serves, in OpenAI's list shape", response: ModelListSchema },
      handle: async () => ({ ok: true, data: { object: 'list', data: models } }),
    },
    {
      method: 'GET',
      path: '/v1/models/:model',
      scope: null,
      doc: { summary: 'One model', response: ModelSchema },
      handle: async ({ params }) => {
        const model = models.find((m) => m.id === params.model);
        if (!model) {
          throw notFound('model_not_found', `The model '${params.model}' does not exist; GET /v1/models lists the models served.`, 'model');
        }
        return { ok: true, data: model };
      },
    },
    ...chatRoutes(chat),
    ...videoRoutes(),
    ...webhookRoutes({ now, ...events }),
  ];
}
