import {
  AddCreditsBody,
  BillingAlertSubjects,
  OrganizationAlertsValidationCodes,
  UpdateOrganizationAlertsBody,
  ApiKeySchema,
  BalanceSchema,
  CreatedApiKeySchema,
  LedgerEntrySchema,
  listOf,
  ListedOrganizationSchema,
  OrganizationSchema,
  OrganizationsQuery,
  CreateApiKeyBody,
  CreateMemberBody,
  CreateOrganizationBody,
  DailySpendSchema,
  DaysQuery,
  DeploymentStatusListSchema,
  KeyDailyUsageSchema,
  ListQuery,
  MemberSchema,
  parseOrThrow,
  Subjects,
  UpdateApiKeyBody,
  UpdateOrganizationBody,
  unwrap,
  usdToMicros,
} from '@oc/contracts';
import { PasswordHasher } from '../application/passwords';
import { adminOrganizationWebhooksRoute } from './admin-organization-routes';
import { paymentAdminRoutes } from './payment-routes';
import type { Route } from './routes';
import { adminActivityRoute } from './activity-routes';
import { adminUsageRoute } from './usage-routes';

/** The operators' API under `/admin/v1`, authorized by ADMIN_TOKEN; API keys never pass here. */
export function adminRoutes(passwords: PasswordHasher = new PasswordHasher()): Route<'admin'>[] {
  const org = '/admin/v1/organizations/:org_id';
  return [
    {
      method: 'POST',
      path: '/admin/v1/organizations',
      scope: null,
      doc: { summary: 'Create an organization', request: CreateOrganizationBody, response: OrganizationSchema },
      handle: ({ services, body, headers }) =>
        services.request(Subjects.billing.createOrganization, parseOrThrow(CreateOrganizationBody, body), { headers }),
    },
    {
      method: 'GET',
      path: '/admin/v1/organizations',
      scope: null,
      doc: {
        summary: 'List organizations with their balances, newest first; `q` finds one by id, or those whose name starts with it (any case), by name',
        query: OrganizationsQuery,
        response: listOf(ListedOrganizationSchema),
      },
      handle: ({ services, query, headers }) =>
        services.request(Subjects.billing.listOrganizations, parseOrThrow(OrganizationsQuery, query), { headers }),
    },
    {
      method: 'GET',
      path: org,
      scope: null,
      doc: { summary: 'Retrieve an organization', response: OrganizationSchema },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.getOrganization, params, { headers }),
    },
    {
      method: 'PATCH',
      path: org,
      scope: null,
      doc: {
        summary: "Change an organization's tier and (enterprise) custom limits; null gives a figure back to the tier",
        request: UpdateOrganizationBody,
        response: OrganizationSchema,
      },
      handle: ({ services, params, body, headers }) =>
        services.request(
          Subjects.billing.updateOrganization,
          { ...parseOrThrow(UpdateOrganizationBody, body), org_id: params.org_id },
          { headers },
        ),
    },
    {
      method: 'PATCH',
      path: `${org}/alerts`,
      scope: null,
      doc: {
        summary: "Set an organization's monthly budget with its alert thresholds, and its low-balance alert (USD; null turns one off)",
        request: UpdateOrganizationAlertsBody,
        response: OrganizationSchema,
      },
      handle: ({ services, params, body, headers }) => {
        const alerts = parseOrThrow(UpdateOrganizationAlertsBody, body, OrganizationAlertsValidationCodes);
        const micros = (usd: number | null | undefined) => (usd === undefined ? undefined : usd === null ? null : usdToMicros(usd));
        return services.request(
          BillingAlertSubjects.updateOrganizationAlerts,
          {
            org_id: params.org_id,
            monthly_budget_micros: micros(alerts.monthly_budget),
            budget_thresholds: alerts.budget_thresholds,
            low_balance_micros: micros(alerts.low_balance),
          },
          { headers },
        );
      },
    },
    {
      method: 'POST',
      path: `${org}/credits`,
      scope: null,
      doc: { summary: 'Add prepaid credit', request: AddCreditsBody, response: BalanceSchema },
      handle: ({ services, params, body, headers }) => {
        const credit = parseOrThrow(AddCreditsBody, body);
        return services.request(
          Subjects.billing.addCredits,
          { org_id: params.org_id, amount_micros: usdToMicros(credit.amount), description: credit.description },
          { headers },
        );
      },
    },
    {
      method: 'GET',
      path: `${org}/balance`,
      scope: null,
      doc: { summary: "An organization's balance", response: BalanceSchema },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.getBalance, params, { headers }),
    },
    {
      method: 'GET',
      path: `${org}/ledger`,
      scope: null,
      doc: { summary: 'Ledger entries, newest first', query: ListQuery, response: listOf(LedgerEntrySchema) },
      handle: ({ services, params, query, headers }) =>
        services.request(Subjects.billing.listLedger, { ...parseOrThrow(ListQuery, query), org_id: params.org_id }, { headers }),
    },
    {
      method: 'POST',
      path: `${org}/keys`,
      scope: null,
      doc: { summary: 'Create an API key (the key is shown only here)', request: CreateApiKeyBody, response: CreatedApiKeySchema },
      handle: ({ services, params, body, headers }) =>
        services.request(
          Subjects.billing.createApiKey,
          { ...parseOrThrow(CreateApiKeyBody, body), org_id: params.org_id },
          { headers },
        ),
    },
    {
      method: 'GET',
      path: `${org}/keys`,
      scope: null,
      doc: { summary: 'List API keys (no secrets)', response: listOf(ApiKeySchema) },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.listApiKeys, params, { headers }),
    },
    {
      method: 'PATCH',
      path: `${org}/keys/:key_id`,
      scope: null,
      doc: {
        summary: 'Rename an API key, change the models it may use or its budget (USD per UTC day, month, all time), effective on the next request',
        request: UpdateApiKeyBody,
        response: ApiKeySchema,
      },
      handle: ({ services, params, body, headers }) =>
        services.request(Subjects.billing.updateApiKey, { ...parseOrThrow(UpdateApiKeyBody, body), org_id: params.org_id, key_id: params.key_id }, { headers }),
    },
    {
      method: 'DELETE',
      path: `${org}/keys/:key_id`,
      scope: null,
      doc: { summary: 'Revoke an API key, effective on the next request', response: ApiKeySchema },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.revokeApiKey, params, { headers }),
    },
    {
      method: 'GET',
      path: `${org}/key-usage`,
      scope: null,
      doc: { summary: 'Requests each API key made per UTC day, oldest first', query: DaysQuery, response: KeyDailyUsageSchema },
      handle: ({ services, params, query, headers }) =>
        services.request(Subjects.billing.keyDailyUsage, { ...parseOrThrow(DaysQuery, query), org_id: params.org_id }, { headers }),
    },
    {
      method: 'GET',
      path: `${org}/spend`,
      scope: null,
      doc: { summary: 'What usage charged per UTC day over the last `days` days (default 30)', query: DaysQuery, response: DailySpendSchema },
      handle: ({ services, params, query, headers }) =>
        services.request(Subjects.billing.dailySpend, { ...parseOrThrow(DaysQuery, query), org_id: params.org_id }, { headers }),
    },
    {
      method: 'POST',
      path: `${org}/members`,
      scope: null,
      doc: {
        summary: 'Add a console member: a person who signs in at /dashboard with this email and password',
        request: CreateMemberBody,
        response: MemberSchema,
        errors: [409],
      },
      handle: async ({ services, params, body, headers }) => {
        const member = parseOrThrow(CreateMemberBody, body);
        // Hashed here, so the password never travels past the gateway (as API keys do not).
        const password_hash = await passwords.hash(member.password);
        return services.request(
          Subjects.billing.createMember,
          { org_id: params.org_id, email: member.email, name: member.name ?? null, password_hash },
          { headers },
        );
      },
    },
    {
      method: 'GET',
      path: `${org}/members`,
      scope: null,
      doc: { summary: "The organization's console members", response: listOf(MemberSchema) },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.listMembers, params, { headers }),
    },
    {
      method: 'DELETE',
      path: `${org}/members/:member_id`,
      scope: null,
      doc: { summary: 'Remove a console member; its sessions end at once', response: MemberSchema },
      handle: ({ services, params, headers }) => services.request(Subjects.billing.removeMember, params, { headers }),
    },
    adminOrganizationWebhooksRoute,
    {
      method: 'GET',
      path: '/admin/v1/providers',
      scope: null,
      doc: {
        summary: "Every model's provider deployments: circuit, success rate, latency and calls in flight, as the answering replicas see them",
        response: DeploymentStatusListSchema,
      },
      handle: async ({ services, headers }) => {
        const deployments = async (subject: string) =>
          DeploymentStatusListSchema.parse(unwrap(await services.request(subject, {}, { headers }))).data;
        // Both or nothing: a list missing one service's deployments would read as if they did not exist.
        const [chat, video] = await Promise.all([deployments(Subjects.chat.deployments), deployments(Subjects.video.deployments)]);
        return { ok: true, data: { object: 'list', data: [...chat, ...video] } };
      },
    },
    adminUsageRoute,
    adminActivityRoute,
    ...paymentAdminRoutes(),
  ];
}
