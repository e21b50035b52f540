import { z } from 'zod';

/**
 * NATS subjects. Request/reply subjects are `<service>.<resource>.<verb>`; domain events leave each
 * service on JetStream as `events.<service>.<EventType>`; broadcasts are fire-and-forget notices. On a
 * NATS server every one of them carries the deployment's prefix (`natsNames`); in one process none does.
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
    updateApiKey: 'billing.keys.update',
    authenticate: 'billing.keys.authenticate',
    recordKeyUsage: 'billing.keys.usage',
    reserveFunds: 'billing.funds.reserve',
    captureReservation: 'billing.funds.capture',
    releaseReservation: 'billing.funds.release',
    listReservationHolders: 'billing.funds.holders',
    releaseHeldReservations: 'billing.funds.release_held',
    dailySpend: 'billing.spend.daily',
    keyDailyUsage: 'billing.keys.daily_usage',
    /** What captures recorded of the deployment that served them, summed by day and deployment. */
    providerUsage: 'billing.usage.providers',
    /** What captures charged one organization, summed by key, model and day. */
    keyUsage: 'billing.usage.keys',
    createMember: 'billing.members.create',
    listMembers: 'billing.members.list',
    removeMember: 'billing.members.remove',
    memberCredentials: 'billing.members.credentials',
    startConsoleSession: 'billing.console_sessions.start',
    authenticateConsoleSession: 'billing.console_sessions.authenticate',
    endConsoleSession: 'billing.console_sessions.end',
    /** Top-ups paid with Stripe: a Checkout Session started, a Stripe webhook delivery, the payment history. */
    startTopUp: 'billing.payments.start_top_up',
    stripeWebhook: 'billing.payments.stripe_webhook',
    listPayments: 'billing.payments.list',
    /** Auto-recharge: its settings and state, and a Checkout Session in setup mode that saves a card. */
    getAutoRecharge: 'billing.auto_recharge.get',
    configureAutoRecharge: 'billing.auto_recharge.configure',
    startCardSetup: 'billing.auto_recharge.start_card_setup',
    ping: 'billing.ping',
  },
  chat: {
    createChatCompletion: 'chat.completions.create',
    createCompletion: 'chat.text_completions.create',
    listSessions: 'chat.sessions.list',
    getSession: 'chat.sessions.get',
    /** The Responses API, served on chat sessions (`chat.responses.<verb>`). */
    createResponse: 'chat.responses.create',
    getResponse: 'chat.responses.get',
    deleteResponse: 'chat.responses.delete',
    listResponseInputItems: 'chat.responses.input_items',
    /** Prefix of the per-request subjects streamed chunks travel on (`chat.streams.<id>`). */
    streamPrefix: 'chat.streams',
    /** Broadcast (every chat replica hears it): the client of this stream went away. */
    cancelStream: 'broadcast.chat.stream_cancelled',
    /** Each deployment's circuit, success rate, latency and calls in flight, as the answering replica sees them. */
    deployments: 'chat.deployments.list',
    ping: 'chat.ping',
  },
  webhook: {
    create: 'webhook.webhooks.create',
    list: 'webhook.webhooks.list',
    get: 'webhook.webhooks.get',
    update: 'webhook.webhooks.update',
    delete: 'webhook.webhooks.delete',
    test: 'webhook.webhooks.test',
    rotateSecret: 'webhook.webhooks.rotate_secret',
    listDeliveries: 'webhook.deliveries.list',
    retryDelivery: 'webhook.deliveries.retry',
    recover: 'webhook.deliveries.recover',
    /** Events after a `Last-Event-ID`, from the bounded window the webhook service keeps. */
    replayEvents: 'webhook.events.replay',
    ping: 'webhook.ping',
  },
  video: {
    create: 'video.videos.create',
    remix: 'video.videos.remix',
    get: 'video.videos.get',
    list: 'video.videos.list',
    delete: 'video.videos.delete',
    describeContent: 'video.content.describe',
    readContent: 'video.content.read',
    deployments: 'video.deployments.list',
    prices: 'video.prices.list',
    ping: 'video.ping',
  },
  broadcast: {
    /** Sent by billing before it answers a revocation, so every gateway drops the key at once. */
    apiKeyRevoked: 'broadcast.billing.key_revoked',
    /** Sent by billing when an organization's tier (and so its limits) changes. */
    organizationChanged: 'broadcast.billing.organization_changed',
  },
} as const;

/**
 * One organization's video events as the webhook service consumes them (`StreamedEvent`), for the gateways'
 * event streams: a subject per organization, so a gateway subscribes to the organizations it serves only.
 */
export const eventStreamSubject = (orgId: string) => `webhook.event_stream.${orgId}`;

export const DEFAULT_NATS_PREFIX = 'oc';

/** `NATS_PREFIX`: begins every subject and names the JetStream stream, so deployments can share a NATS server. */
export const NatsPrefixSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,32}$/)
  .default(DEFAULT_NATS_PREFIX)
  .describe('1 to 32 letters, digits, - or _; every subject and the JetStream stream carry it');

/**
 * `NATS_URL`: one server, or several separated by commas (the nodes of a cluster), so that a client whose node
 * goes away reconnects to another; the NATS client takes a comma-joined string as one address.
 */
export const NatsUrlSchema = z
  .string()
  .default('nats://127.0.0.1:4222')
  .transform((urls) => urls.split(',').map((url) => url.trim()).filter(Boolean))
  .pipe(z.array(z.string()).min(1))
  .describe('a NATS URL, or several separated by commas');

/**
 * `NATS_STREAM_REPLICAS`: how many servers of a NATS cluster keep each JetStream stream the services create (the
 * events, the leases; their consumers follow the stream), so that one server lost loses no event. At most the
 * cluster's size; 1 on a single server.
 */
export const NatsStreamReplicasSchema = z.coerce
  .number()
  .int()
  .min(1)
  .max(5)
  .default(1)
  .describe('1 to 5, at most the number of NATS servers in the cluster');

/**
 * The names one deployment uses on a NATS server: `<prefix>.<subject>` for requests and broadcasts,
 * `<prefix>.events.<service>.<EventType>` on the stream `<PREFIX>_EVENTS` for domain events.
 */
export function natsNames(prefix: string = DEFAULT_NATS_PREFIX) {
  return {
    subject: (subject: string) => `${prefix}.${subject}`,
    eventsStream: `${prefix.toUpperCase()}_EVENTS`,
    eventSubject: (service: string, type: string) => `${prefix}.events.${service}.${type}`,
    /** Leases (`relay.<service>`: which replica runs the service's outbox relay), on the stream `<PREFIX>_LEASES`. */
    leasesStream: `${prefix.toUpperCase()}_LEASES`,
    lease: (key: string) => `${prefix}.leases.${key}`,
    /** A query waits for this position of the log in the service's read models: heard by the replica projecting them. */
    projectionWanted: (service: string) => `${prefix}.projections.${service}.wanted`,
    /** Where a running replica answers "still here" (its name as one subject-safe token). */
    presence: (service: string, replica: string) => `${prefix}.presence.${service}.${subjectToken(replica)}`,
  };
}
export type NatsNames = ReturnType<typeof natsNames>;

/** Any name as one subject token: no `.`, wildcard or white space left (`web-1.example` → `web-1%2Eexample`). */
const subjectToken = (name: string) => encodeURIComponent(name).replace(/[.*!~'()]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
