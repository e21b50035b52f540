import { listOf, type Reply, Subjects, unwrap, type Webhook, WebhookListSchema, WebhookSchema } from '@oc/contracts';
import type { Route } from './routes';

/**
 * GET /admin/v1/organizations/{org_id}/webhooks: the organization's endpoints with their delivery health, as
 * `GET /v1/webhooks/{id}` shows each (never a secret). The webhook service lists an organization's endpoints
 * without their failures, so each is read after the list: at most MAX_WEBHOOKS_PER_ORGANIZATION (20) requests.
 */
export const adminOrganizationWebhooksRoute: Route<'admin'> = {
  method: 'GET',
  path: '/admin/v1/organizations/:org_id/webhooks',
  scope: null,
  doc: { summary: "An organization's webhooks with their failures (no secrets), newest first", response: listOf(WebhookSchema), errors: [404] },
  handle: async ({ services, params, headers }) => {
    const org_id = params.org_id!;
    // The webhook service knows no organizations: an id that names none is a 404, not an empty list.
    const [, list] = await Promise.all([
      services.request(Subjects.billing.getOrganization, { org_id }, { headers }).then(unwrap),
      services.request(Subjects.webhook.list, { org_id }, { headers }).then((reply) => WebhookListSchema.parse(unwrap(reply))),
    ]);
    const webhooks = await Promise.all(
      list.data.map(async (summary) => {
        const reply = (await services.request(Subjects.webhook.get, { org_id, webhook_id: summary.id }, { headers })) as Reply<Webhook>;
        // Deleted since the list was read: it is no longer the organization's.
        if (!reply.ok && reply.error.status === 404) return [];
        return [WebhookSchema.parse(unwrap(reply))];
      }),
    );
    return { ok: true, data: { object: 'list', data: webhooks.flat(), has_more: false } };
  },
};
