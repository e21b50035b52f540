import { createHash, randomBytes } from 'node:crypto';
import {
  type ApiKey,
  type Balance,
  type BillingMessage,
  type Clock,
  type CreatedApiKey,
  DEFAULT_KEY_RATE_LIMIT_PER_MINUTE,
  DomainError,
  effectiveLimits,
  type IdSource,
  type KeyPrincipal,
  type LedgerEntry,
  microsToUsd,
  type Organization,
  unixSeconds,
} from '@oc/contracts';
import type { CommandHandler, EventMetadata, EventStore } from '@oc/eventstore';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import { telemetryEnabled } from '@oc/telemetry';
import { accountDecider, type AccountCommand, accountStream } from '../domain/account';
import { apiKeyDecider, type ApiKeyCommand, apiKeyStream } from '../domain/api-key';
import { type ApiKeyDoc, Collections, type LedgerEntryDoc, type OpenReservationDoc, type OrganizationDoc } from '../projections/documents';
import { recordReservation } from './telemetry';

/** Lets every gateway forget a key or an organization's cached limits before we answer. */
export interface GatewayNotifier {
  keyRevoked(keyHash: string): Promise<void>;
  organizationChanged(orgId: string): Promise<void>;
}

export interface BillingDeps {
  eventStore: EventStore;
  commands: CommandHandler;
  readModels: ReadModels;
  notifier: GatewayNotifier;
  clock: Clock;
  ids: IdSource;
  /** 32 random bytes for a new API key; injected so tests can pin them. */
  keyBytes?: () => Buffer;
}

export const hashApiKey = (key: string) => createHash('sha256').update(key).digest('hex');

const DAY_SECONDS = 86_400;
/** How long a reservation whose product named no expiry is held. */
export const DEFAULT_RESERVATION_TTL_SECONDS = 3_600;
/** Reservations expired by one sweep at most; the next sweep takes the rest. */
const EXPIRY_SWEEP_LIMIT = 500;

export class BillingService {
  constructor(private readonly deps: BillingDeps) {}

  private get orgs() {
    return this.deps.readModels.collection<OrganizationDoc>(Collections.organizations);
  }
  private get keys() {
    return this.deps.readModels.collection<ApiKeyDoc>(Collections.apiKeys);
  }

  /** Stored when this resolves; the read models show it to any query made after (`readYourWrites`). */
  private account(command: AccountCommand, metadata?: EventMetadata) {
    const handled = this.deps.commands.handle(accountStream(command.orgId), accountDecider, command, metadata);
    if (telemetryEnabled()) handled.then((result) => recordReservation(command, result), (error: unknown) => recordReservation(command, { error }));
    return handled;
  }

  private apiKey(command: ApiKeyCommand) {
    return this.deps.commands.handle(apiKeyStream(command.keyId), apiKeyDecider, command);
  }

  private async organizationDoc(orgId: string): Promise<OrganizationDoc> {
    const org = await this.orgs.findOne({ _id: orgId });
    if (!org) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: orgId });
    return org;
  }

  async createOrganization(m: BillingMessage<'createOrganization'>): Promise<Organization> {
    const orgId = this.deps.ids.next('org_');
    await this.account({ type: 'CreateOrganization', orgId, name: m.name, tier: m.tier, now: unixSeconds(this.deps.clock.now()) });
    return toOrganization(await this.organizationDoc(orgId));
  }

  async listOrganizations(m: BillingMessage<'listOrganizations'>) {
    const page = await pageAfter(this.orgs, {}, 'created', m);
    return { object: 'list' as const, data: page.data.map(toOrganization), has_more: page.has_more };
  }

  async getOrganization(m: BillingMessage<'getOrganization'>): Promise<Organization> {
    return toOrganization(await this.organizationDoc(m.org_id));
  }

  async updateOrganization(m: BillingMessage<'updateOrganization'>): Promise<Organization> {
    const { events } = await this.account({ type: 'UpdateOrganization', orgId: m.org_id, tier: m.tier, limits: m.limits });
    if (events.length > 0) await this.deps.notifier.organizationChanged(m.org_id);
    return toOrganization(await this.organizationDoc(m.org_id));
  }

  async addCredits(m: BillingMessage<'addCredits'>): Promise<Balance> {
    await this.account({ type: 'AddCredits', orgId: m.org_id, amountMicros: m.amount_micros, description: m.description });
    return this.getBalance(m);
  }

  async getBalance(m: BillingMessage<'getBalance'>): Promise<Balance> {
    const org = await this.organizationDoc(m.org_id);
    return {
      object: 'balance',
      organization_id: org._id,
      available: microsToUsd(org.balance_micros - org.reserved_micros),
      reserved: microsToUsd(org.reserved_micros),
      currency: 'usd',
      tier: org.tier,
    };
  }

  async listLedger(m: BillingMessage<'listLedger'>) {
    await this.organizationDoc(m.org_id);
    const ledger = this.deps.readModels.collection<LedgerEntryDoc>(Collections.ledger);
    const page = await pageAfter(ledger, { org_id: m.org_id }, 'position', m);
    return { object: 'list' as const, data: page.data.map(toLedgerEntry), has_more: page.has_more };
  }

  async reserveFunds(m: BillingMessage<'reserveFunds'>) {
    await this.account({
      type: 'ReserveFunds',
      orgId: m.org_id,
      reservationId: m.reservation_id,
      amountMicros: m.amount_micros,
      description: m.description,
      expiresAt: m.expires_at ?? unixSeconds(this.deps.clock.now()) + DEFAULT_RESERVATION_TTL_SECONDS,
    });
    return { reservation_id: m.reservation_id };
  }

  /**
   * Releases every open reservation past its expiry: the safety net for work whose product died before
   * settling it. Safe to run on several replicas at once (an expiry already applied decides nothing).
   */
  async expireReservations(): Promise<number> {
    const now = unixSeconds(this.deps.clock.now());
    const due = await this.deps.readModels
      .collection<OpenReservationDoc>(Collections.openReservations)
      .find({ expires_at: { $lte: now } }, { sort: { expires_at: 1 }, limit: EXPIRY_SWEEP_LIMIT });
    for (const r of due) {
      await this.account({ type: 'ExpireReservation', orgId: r.org_id, reservationId: r.reservation_id, now });
    }
    return due.length;
  }

  async captureReservation(m: BillingMessage<'captureReservation'>) {
    await this.account({
      type: 'CaptureReservation',
      orgId: m.org_id,
      reservationId: m.reservation_id,
      amountMicros: m.amount_micros,
    });
    return { reservation_id: m.reservation_id };
  }

  async releaseReservation(m: BillingMessage<'releaseReservation'>) {
    await this.account({ type: 'ReleaseReservation', orgId: m.org_id, reservationId: m.reservation_id });
    return { reservation_id: m.reservation_id };
  }

  async createApiKey(m: BillingMessage<'createApiKey'>): Promise<CreatedApiKey> {
    await this.organizationDoc(m.org_id);
    const key = `oc_${m.mode}_${(this.deps.keyBytes ?? (() => randomBytes(32)))().toString('base64url')}`;
    const keyId = this.deps.ids.next('key_');
    const now = unixSeconds(this.deps.clock.now());
    await this.apiKey({
      type: 'CreateApiKey',
      keyId,
      orgId: m.org_id,
      name: m.name,
      mode: m.mode,
      prefix: key.slice(0, 12),
      keyHash: hashApiKey(key),
      scopes: [...new Set(m.scopes)],
      rateLimitPerMinute: m.rate_limit_per_minute ?? DEFAULT_KEY_RATE_LIMIT_PER_MINUTE,
      expiresAt: m.expires_in_days === undefined ? null : now + m.expires_in_days * DAY_SECONDS,
      now,
    });
    const doc = await this.keys.findOne({ _id: keyId });
    return { ...toApiKey(doc!), key };
  }

  async listApiKeys(m: BillingMessage<'listApiKeys'>) {
    await this.organizationDoc(m.org_id);
    const docs = await this.keys.find({ org_id: m.org_id }, { sort: { created: -1, _id: -1 }, limit: 1000 });
    return { object: 'list' as const, data: docs.map(toApiKey), has_more: false };
  }

  async revokeApiKey(m: BillingMessage<'revokeApiKey'>): Promise<ApiKey> {
    await this.apiKey({ type: 'RevokeApiKey', keyId: m.key_id, orgId: m.org_id, now: unixSeconds(this.deps.clock.now()) });
    const doc = (await this.keys.findOne({ _id: m.key_id }))!;
    await this.deps.notifier.keyRevoked(doc.key_hash);
    return toApiKey(doc);
  }

  /**
   * Null for an unknown or revoked key. An expired key still resolves, with its `expires_at`: the gateway
   * checks expiry on every request (cached principals expire too) and tells the caller the key expired.
   */
  async authenticate(m: BillingMessage<'authenticate'>): Promise<KeyPrincipal | null> {
    const key = await this.keys.findOne({ key_hash: m.key_hash });
    if (!key || key.revoked_at !== null) return null;
    const org = await this.orgs.findOne({ _id: key.org_id });
    if (!org) return null;
    return {
      key_id: key._id,
      org_id: key.org_id,
      mode: key.mode,
      scopes: key.scopes,
      rate_limit_per_minute: key.rate_limit_per_minute,
      tier: org.tier,
      limits: effectiveLimits(org.tier, org.custom_limits),
      expires_at: key.expires_at,
    };
  }

  async recordKeyUsage(m: BillingMessage<'recordKeyUsage'>) {
    for (const u of m.usage) {
      await this.deps.commands.handle(apiKeyStream(u.key_id), apiKeyDecider, {
        type: 'RecordApiKeyUsage',
        keyId: u.key_id,
        requests: u.requests,
        lastUsedAt: u.last_used_at,
      });
    }
    return { recorded: m.usage.length };
  }

  /** Readiness: both stores answer. */
  async ping() {
    await Promise.all([this.deps.eventStore.ping(), this.deps.readModels.ping()]);
    return { status: 'ok' as const };
  }
}

const toOrganization = (doc: OrganizationDoc): Organization => ({
  id: doc._id,
  object: 'organization',
  name: doc.name,
  tier: doc.tier,
  limits: effectiveLimits(doc.tier, doc.custom_limits),
  created: doc.created,
});

const toLedgerEntry = (doc: LedgerEntryDoc): LedgerEntry => ({
  id: doc._id,
  object: 'ledger_entry',
  type: doc.type,
  amount: microsToUsd(doc.amount_micros),
  charged: microsToUsd(doc.charged_micros),
  available_after: microsToUsd(doc.available_after_micros),
  description: doc.description,
  reference: doc.reference,
  created: doc.created,
});

const toApiKey = (doc: ApiKeyDoc): ApiKey => ({
  id: doc._id,
  object: 'api_key',
  name: doc.name,
  mode: doc.mode,
  prefix: doc.prefix,
  scopes: doc.scopes,
  rate_limit_per_minute: doc.rate_limit_per_minute,
  created: doc.created,
  expires_at: doc.expires_at,
  last_used_at: doc.last_used_at,
  revoked_at: doc.revoked_at,
  usage: { requests: doc.requests },
});
