/**
 * NATS subjects. Request/reply subjects are `<service>.<resource>.<verb>`; domain events leave each
 * service on JetStream as `events.<service>.<EventType>`; broadcasts are fire-and-forget notices.
 */
export const Subjects = {
  billing: {
    createOrganization: 'billing.organizations.create',
    listOrganizations: 'billing.organizations.list',
    getOrganization: 'billing.organizations.get',
    updateOrganization: 'billing.organizations.update',
    addCredits: 'billing.credits.add',
    listLedger: 'billing.ledger.list',
    getBalance: 'billing.balance.get',
    createApiKey: 'billing.keys.create',
    listApiKeys: 'billing.keys.list',
    revokeApiKey: 'billing.keys.revoke',
    authenticate: 'billing.keys.authenticate',
    recordKeyUsage: 'billing.keys.usage',
    reserveFunds: 'billing.funds.reserve',
    captureReservation: 'billing.funds.capture',
    releaseReservation: 'billing.funds.release',
    ping: 'billing.ping',
  },
  broadcast: {
    /** Sent by billing before it answers a revocation, so every gateway drops the key at once. */
    apiKeyRevoked: 'broadcast.billing.key_revoked',
    /** Sent by billing when an organization's tier (and so its limits) changes. */
    organizationChanged: 'broadcast.billing.organization_changed',
  },
} as const;

export const EVENTS_STREAM = 'EVENTS';
export const eventSubject = (service: string, type: string) => `events.${service}.${type}`;
