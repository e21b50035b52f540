import {
  CreatedWebhookSchema,
  CreateWebhookBody,
  DeletedWebhookSchema,
  DeliveriesQuery,
  DeliveryAttemptSchema,
  DeliverySchema,
  listOf,
  parseOrThrow,
  RecoverWebhookBody,
  RotatedSecretSchema,
  Subjects,
  TestDeliveryResultSchema,
  TestWebhookBody,
  UpdateWebhookBody,
  WebhookListSchema,
  WebhookRecoverySchema,
  WebhookSchema,
  WebhookValidationCodes,
} from '@oc/contracts';
import { type EventStreamOptions, eventStreamRoute } from './event-stream-routes';
import type { Route } from './routes';

/** The test operation waits for the endpoint, up to the 30 s delivery deadline; the request gets a little more. */
const TEST_DELIVERY_TIMEOUT_MS = 35_000;

/**
 * `/v1/webhooks`. The test operation, secret rotation, retry and recover change what is sent, so they
 * need `webhook:write`; the delivery log and the event stream are read with `webhook:read`.
 */
export function webhookRoutes(events: EventStreamOptions = {}): Route[] {
  const one = '/v1/webhooks/:webhook_id';
  return [
    eventStreamRoute(events),
    {
      method: 'POST',
      path: '/v1/webhooks',
      scope: 'webhook:write',
      doc: { summary: 'Register a webhook endpoint (its signing secret is shown once)', request: CreateWebhookBody, response: CreatedWebhookSchema },
      handle: ({ services, principal, body, headers }) =>
        services.request(
          Subjects.webhook.create,
          { ...parseOrThrow(CreateWebhookBody, body, WebhookValidationCodes), org_id: principal.org_id },
          { headers },
        ),
    },
    {
      method: 'GET',
      path: '/v1/webhooks',
      scope: 'webhook:read',
      doc: { summary: "List the organization's webhooks", response: WebhookListSchema },
      handle: ({ services, principal, headers }) => services.request(Subjects.webhook.list, { org_id: principal.org_id }, { headers }),
    },
    {
      method: 'GET',
      path: one,
      scope: 'webhook:read',
      doc: { summary: 'Retrieve a webhook', response: WebhookSchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(Subjects.webhook.get, { org_id: principal.org_id, webhook_id: params.webhook_id }, { headers }),
    },
    {
      method: 'PATCH',
      path: one,
      scope: 'webhook:write',
      doc: { summary: 'Change a webhook (URL, events, description, active state)', request: UpdateWebhookBody, response: WebhookSchema },
      handle: ({ services, principal, params, body, headers }) =>
        services.request(
          Subjects.webhook.update,
          {
            org_id: principal.org_id,
            webhook_id: params.webhook_id,
            changes: parseOrThrow(UpdateWebhookBody, body, WebhookValidationCodes),
          },
          { headers },
        ),
    },
    {
      method: 'DELETE',
      path: one,
      scope: 'webhook:delete',
      doc: { summary: 'Delete a webhook', response: DeletedWebhookSchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(Subjects.webhook.delete, { org_id: principal.org_id, webhook_id: params.webhook_id }, { headers }),
    },
    {
      method: 'POST',
      path: `${one}/test`,
      scope: 'webhook:write',
      doc: { summary: 'Send a test event now and report what the endpoint answered', request: TestWebhookBody, response: TestDeliveryResultSchema },
      handle: ({ services, principal, params, body, headers }) =>
        services.request(
          Subjects.webhook.test,
          { ...parseOrThrow(TestWebhookBody, body, WebhookValidationCodes), org_id: principal.org_id, webhook_id: params.webhook_id },
          { headers, timeoutMs: TEST_DELIVERY_TIMEOUT_MS },
        ),
    },
    {
      method: 'POST',
      path: `${one}/rotate-secret`,
      scope: 'webhook:write',
      doc: { summary: 'Issue a new signing secret; the previous one also signs until previous_secret_expires_at', response: RotatedSecretSchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(Subjects.webhook.rotateSecret, { org_id: principal.org_id, webhook_id: params.webhook_id }, { headers }),
    },
    {
      method: 'GET',
      path: `${one}/deliveries`,
      scope: 'webhook:read',
      doc: { summary: 'The delivery log, newest attempt first', query: DeliveriesQuery, response: listOf(DeliveryAttemptSchema) },
      handle: ({ services, principal, params, query, headers }) =>
        services.request(
          Subjects.webhook.listDeliveries,
          { ...parseOrThrow(DeliveriesQuery, query), org_id: principal.org_id, webhook_id: params.webhook_id },
          { headers },
        ),
    },
    {
      method: 'POST',
      path: `${one}/deliveries/:delivery_id/retry`,
      scope: 'webhook:write',
      doc: { summary: 'Send a failed delivery again now', response: DeliverySchema },
      handle: ({ services, principal, params, headers }) =>
        services.request(
          Subjects.webhook.retryDelivery,
          { org_id: principal.org_id, webhook_id: params.webhook_id, delivery_id: params.delivery_id },
          { headers },
        ),
    },
    {
      method: 'POST',
      path: `${one}/recover`,
      scope: 'webhook:write',
      doc: { summary: 'Queue again every failed delivery since a time', request: RecoverWebhookBody, response: WebhookRecoverySchema },
      handle: ({ services, principal, params, body, headers }) =>
        services.request(
          Subjects.webhook.recover,
          { ...parseOrThrow(RecoverWebhookBody, body, WebhookValidationCodes), org_id: principal.org_id, webhook_id: params.webhook_id },
          { headers },
        ),
    },
  ];
}
