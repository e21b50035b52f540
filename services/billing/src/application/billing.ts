import { createHash, randomBytes } from 'node:crypto';
import {
  type ApiKey,
  type Balance,
  type BillingMessage,
  type Clock,
  type ConsolePrincipal,
  type CreatedApiKey,
  type DailySpend,
  DEFAULT_KEY_RATE_LIMIT_PER_MINUTE,
  DEFAULT_BUDGET_THRESHOLDS,
  DomainError,
  effectiveLimits,
  type IdSource,
  type KeyDailyUsage,
  type KeyUsageReport,
  type KeyPrincipal,
  type LedgerEntry,
  type Member,
  microsToUsd,
  type Organization,
  unixSeconds,
  type UsageReport,
} from '@oc/contracts';
import type { CommandHandler, EventMetadata, EventStore, HandleOptions } from '@oc/eventstore';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import { telemetryEnabled } from '@oc/telemetry';
import { accountDecider, type AccountCommand, accountStream } from '../domain/account';
import { apiKeyDecider, type ApiKeyCommand, apiKeyStream } from '../domain/api-key';
import { consoleSessionDecider, consoleSessionStream } from '../domain/console-session';
import { memberDecider, memberStream } from '../domain/member';
import { AlertCollections, type AlertSettingsDoc } from '../projections/alerts-projection';
import { utcDay } from '../projections/billing-projections';
import {
  type ApiKeyDoc,
  Collections,
  type ConsoleSessionDoc,
  type DailySpendDoc,
  type KeyDailyUsageDoc,
  type LedgerEntryDoc,
  type MemberDoc,
  type OpenReservationDoc,
  type OrganizationDoc,
} from '../projections/documents';
import { ActivityLog } from './activity';
import { keyBudgetView, setsAnyLimit } from './key-budgets';
import { searchOrganizations, withBalance } from './organization-search';
import { recordReservation } from './telemetry';
import { UsageReports } from './usage-reports';

/** Lets every gateway forget a key or an organization's cached limits before we answer. */
export interface GatewayNotifier {
  /** A key revoked or changed: every gateway drops it from its cache and asks again at its next use. */
  keyChanged(keyHash: string): Promise<void>;
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
  /** The products that capture run in this process: a capture may be answered once decided (`answer_when_decided`). */
  callersInProcess?: boolean;
}

export const hashApiKey = (key: string) => createHash('sha256').update(key).digest('hex');

const DAY_SECONDS = 86_400;
/** Rows of key usage one answer carries at most (a thousand keys over ninety days would be 90,000). */
const KEY_USAGE_ROWS = 10_000;
/** How long a reservation whose product named no expiry is held. */
export const DEFAULT_RESERVATION_TTL_SECONDS = 3_600;
/** Reservations expired (or released for their holder) by one call at most; the next takes the rest. */
const EXPIRY_SWEEP_LIMIT = 500;
/** Holders one answer names at most: far more replicas than any deployment runs. */
const HOLDERS_LIMIT = 1_000;
export class BillingService {
  private readonly usageReports: UsageReports;
  /** The organization's paid requests, one by one (the console's and the admin API's activity log). */
  readonly activity: ActivityLog;

  constructor(private readonly deps: BillingDeps) {
    this.usageReports = new UsageReports(deps);
    this.activity = new ActivityLog(deps);
  }

  private get orgs() {
    return this.deps.readModels.collection<OrganizationDoc>(Collections.organizations);
  }
  private get keys() {
    return this.deps.readModels.collection<ApiKeyDoc>(Collections.apiKeys);
  }

  /** Stored when this resolves (unless `options` say otherwise); the read models show it to any query made after (`readYourWrites`). */
  private account(command: AccountCommand, metadata?: EventMetadata, options?: HandleOptions) {
    const handled = this.deps.commands.handle(accountStream(command.orgId), accountDecider, command, metadata, options);
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
    return (await this.withAlerts([await this.organizationDoc(orgId)]))[0]!;
  }

  async listOrganizations(m: BillingMessage<'listOrganizations'>) {
    const page = m.q === undefined ? await pageAfter(this.orgs, {}, 'created', m) : await searchOrganizations(this.deps.readModels, { ...m, q: m.q });
    const organizations = await this.withAlerts(page.data);
    return { object: 'list' as const, data: organizations.map((o, i) => withBalance(o, page.data[i]!)), has_more: page.has_more };
  }

  async getOrganization(m: BillingMessage<'getOrganization'>): Promise<Organization> {
    return (await this.withAlerts([await this.organizationDoc(m.org_id)]))[0]!;
  }

  /** The organizations with their alert settings (kept apart, on their own stream; absent until first set). */
  private async withAlerts(docs: OrganizationDoc[]): Promise<Organization[]> {
    const ids = docs.map((d) => d._id);
    const settings = ids.length === 0 ? [] : await this.deps.readModels.collection<AlertSettingsDoc>(AlertCollections.alertSettings).find({ _id: { $in: ids } });
    const byOrg = new Map(settings.map((s) => [s._id, s]));
    return docs.map((doc) => toOrganization(doc, byOrg.get(doc._id)));
  }

  async updateOrganization(m: BillingMessage<'updateOrganization'>): Promise<Organization> {
    const { events } = await this.account({ type: 'UpdateOrganization', orgId: m.org_id, tier: m.tier, limits: m.limits });
    if (events.length > 0) await this.deps.notifier.organizationChanged(m.org_id);
    return this.getOrganization(m);
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
    const now = unixSeconds(this.deps.clock.now());
    await this.account(
      {
        type: 'ReserveFunds',
        orgId: m.org_id,
        reservationId: m.reservation_id,
        amountMicros: m.amount_micros,
        description: m.description,
        expiresAt: m.expires_at ?? now + DEFAULT_RESERVATION_TTL_SECONDS,
        now,
        ...(m.holder === undefined ? {} : { holder: m.holder }),
        ...(m.key_id === undefined ? {} : { keyId: m.key_id }),
      },
      undefined,
      // Its commit overlaps the product's upstream call, wherever the product runs (where billing is the account's
      // only writer: the command handler decides so). A crash before it is stored loses the hold, and the
      // product's capture is then refused: nothing is charged that was never held, and an answer that waits
      // for its capture (a plain chat) fails instead (docs/decisions.md, One durable commit on the request path).
      { answerWhenDecided: m.answer_when_decided === true },
    );
    return { reservation_id: m.reservation_id };
  }

  private get openReservations() {
    return this.deps.readModels.collection<OpenReservationDoc>(Collections.openReservations);
  }

  async listReservationHolders(m: BillingMessage<'listReservationHolders'>) {
    const holders: string[] = [];
    // Names with the prefix sort between it and it followed by the highest character.
    const end = `${m.prefix}\uffff`;
    while (holders.length < HOLDERS_LIMIT) {
      const [next] = await this.openReservations.find({ holder: { $gt: holders.at(-1) ?? m.prefix, $lt: end } }, { sort: { holder: 1 }, limit: 1 });
      if (typeof next?.holder !== 'string') break;
      holders.push(next.holder);
    }
    return { holders };
  }

  async releaseHeldReservations(m: BillingMessage<'releaseHeldReservations'>) {
    const held = await this.openReservations.find({ holder: m.holder }, { limit: EXPIRY_SWEEP_LIMIT + 1 });
    for (const r of held.slice(0, EXPIRY_SWEEP_LIMIT)) {
      await this.account({ type: 'ReleaseReservation', orgId: r.org_id, reservationId: r.reservation_id, now: unixSeconds(this.deps.clock.now()) });
    }
    return { released: Math.min(held.length, EXPIRY_SWEEP_LIMIT), more: held.length > EXPIRY_SWEEP_LIMIT };
  }

  /**
   * Releases every open reservation past its expiry: the safety net for work whose product died before
   * settling it. Safe to run on several replicas at once (an expiry already applied decides nothing).
   */
  async expireReservations(): Promise<number> {
    const now = unixSeconds(this.deps.clock.now());
    const due = await this.openReservations.find({ expires_at: { $lte: now } }, { sort: { expires_at: 1 }, limit: EXPIRY_SWEEP_LIMIT });
    for (const r of due) {
      await this.account({ type: 'ExpireReservation', orgId: r.org_id, reservationId: r.reservation_id, now });
    }
    return due.length;
  }

  async captureReservation(m: BillingMessage<'captureReservation'>) {
    await this.account(
      {
        type: 'CaptureReservation',
        orgId: m.org_id,
        reservationId: m.reservation_id,
        amountMicros: m.amount_micros,
        usage: m.usage,
        now: unixSeconds(this.deps.clock.now()),
      },
      undefined,
      { answerWhenDecided: m.answer_when_decided === true && this.deps.callersInProcess === true },
    );
    return { reservation_id: m.reservation_id };
  }

  async releaseReservation(m: BillingMessage<'releaseReservation'>) {
    await this.account({ type: 'ReleaseReservation', orgId: m.org_id, reservationId: m.reservation_id, now: unixSeconds(this.deps.clock.now()) });
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
      allowedModels: m.allowed_models ?? null,
      now,
    });
    // Before the key is shown, so no request of it goes unlimited.
    if (setsAnyLimit(m.budget)) await this.account({ type: 'SetKeyBudget', orgId: m.org_id, keyId, budget: m.budget! });
    const doc = await this.keys.findOne({ _id: keyId });
    return { ...this.toApiKey(doc!), key };
  }

  async listApiKeys(m: BillingMessage<'listApiKeys'>) {
    await this.organizationDoc(m.org_id);
    const docs = await this.keys.find({ org_id: m.org_id }, { sort: { created: -1, _id: -1 }, limit: 1000 });
    return { object: 'list' as const, data: docs.map((doc) => this.toApiKey(doc)), has_more: false };
  }

  /**
   * A change applies from the next request on every gateway: each drops the key from its cache first. The budget is
   * the account's (decided with the reservations it limits), set once the key's stream has said the key may change.
   */
  async updateApiKey(m: BillingMessage<'updateApiKey'>): Promise<ApiKey> {
    await this.apiKey({ type: 'UpdateApiKey', keyId: m.key_id, orgId: m.org_id, name: m.name, allowedModels: m.allowed_models, now: unixSeconds(this.deps.clock.now()) });
    if (m.budget !== undefined) await this.account({ type: 'SetKeyBudget', orgId: m.org_id, keyId: m.key_id, budget: m.budget });
    const doc = (await this.keys.findOne({ _id: m.key_id }))!;
    await this.deps.notifier.keyChanged(doc.key_hash);
    return this.toApiKey(doc);
  }

  async revokeApiKey(m: BillingMessage<'revokeApiKey'>): Promise<ApiKey> {
    await this.apiKey({ type: 'RevokeApiKey', keyId: m.key_id, orgId: m.org_id, now: unixSeconds(this.deps.clock.now()) });
    const doc = (await this.keys.findOne({ _id: m.key_id }))!;
    await this.deps.notifier.keyChanged(doc.key_hash);
    return this.toApiKey(doc);
  }

  private toApiKey(doc: ApiKeyDoc): ApiKey {
    return { ...toApiKey(doc), ...keyBudgetView(doc, this.deps.clock.now()) };
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
      allowed_models: key.allowed_models ?? null,
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

  private get members() {
    return this.deps.readModels.collection<MemberDoc>(Collections.members);
  }

  /** The first UTC day of a window of `days` days that ends today (by the injected clock). */
  private firstDay(days: number): string {
    return utcDay(this.deps.clock.now() - (days - 1) * DAY_SECONDS * 1000);
  }

  async dailySpend(m: BillingMessage<'dailySpend'>): Promise<DailySpend> {
    await this.organizationDoc(m.org_id);
    const from = this.firstDay(m.days);
    const docs = await this.deps.readModels
      .collection<DailySpendDoc>(Collections.dailySpend)
      .find({ org_id: m.org_id, day: { $gte: from } }, { sort: { day: 1 }, limit: m.days + 1 });
    const charged = new Map(docs.map((d) => [d.day, d.charged_micros]));
    const days: DailySpend['days'] = [];
    let total = 0;
    for (let i = m.days - 1; i >= 0; i--) {
      const date = utcDay(this.deps.clock.now() - i * DAY_SECONDS * 1000);
      const micros = charged.get(date) ?? 0;
      total += micros;
      days.push({ date, amount: microsToUsd(micros) });
    }
    return { object: 'daily_spend', organization_id: m.org_id, days, total: microsToUsd(total), currency: 'usd' };
  }

  async keyDailyUsage(m: BillingMessage<'keyDailyUsage'>): Promise<KeyDailyUsage> {
    await this.organizationDoc(m.org_id);
    const docs = await this.deps.readModels
      .collection<KeyDailyUsageDoc>(Collections.keyDailyUsage)
      .find({ org_id: m.org_id, day: { $gte: this.firstDay(m.days) } }, { sort: { day: 1 }, limit: KEY_USAGE_ROWS + 1 });
    return {
      object: 'list',
      data: docs.slice(0, KEY_USAGE_ROWS).map((d) => ({ key_id: d.key_id, date: d.day, requests: d.requests })),
      has_more: docs.length > KEY_USAGE_ROWS,
    };
  }

  /** What paid requests used, earned and cost us (the admin API's report). */
  providerUsage(m: BillingMessage<'providerUsage'>): Promise<UsageReport> {
    return this.usageReports.providerUsage(m);
  }

  /** What one organization's paid requests used and were charged, by key, model and day (the console's report). */
  keyUsage(m: BillingMessage<'keyUsage'>): Promise<KeyUsageReport> {
    return this.usageReports.keyUsage(m);
  }

  async createMember(m: BillingMessage<'createMember'>): Promise<Member> {
    await this.organizationDoc(m.org_id);
    const memberId = this.deps.ids.next('mem_');
    await this.deps.commands.handle(memberStream(m.email), memberDecider, {
      type: 'CreateMember',
      memberId,
      orgId: m.org_id,
      email: m.email,
      name: m.name,
      passwordHash: m.password_hash,
      now: unixSeconds(this.deps.clock.now()),
    });
    return toMember((await this.members.findOne({ _id: memberId }))!);
  }

  async listMembers(m: BillingMessage<'listMembers'>) {
    await this.organizationDoc(m.org_id);
    const docs = await this.members.find({ org_id: m.org_id }, { sort: { created: -1, _id: -1 }, limit: 1000 });
    return { object: 'list' as const, data: docs.map(toMember), has_more: false };
  }

  /** Removing a member ends its console sessions at once: a session is only as good as its member. */
  async removeMember(m: BillingMessage<'removeMember'>): Promise<Member> {
    const doc = await this.members.findOne({ _id: m.member_id });
    if (!doc || doc.org_id !== m.org_id) throw new DomainError({ kind: 'NotFound', resource: 'member', id: m.member_id });
    await this.deps.commands.handle(memberStream(doc.email), memberDecider, {
      type: 'RemoveMember',
      memberId: doc._id,
      orgId: doc.org_id,
      now: unixSeconds(this.deps.clock.now()),
    });
    return toMember(doc);
  }

  async memberCredentials(m: BillingMessage<'memberCredentials'>) {
    const doc = await this.members.findOne({ email: m.email });
    return doc ? { member_id: doc._id, org_id: doc.org_id, password_hash: doc.password_hash } : null;
  }

  async startConsoleSession(m: BillingMessage<'startConsoleSession'>): Promise<ConsolePrincipal> {
    let subject: { kind: 'member'; memberId: string; orgId: string } | { kind: 'operator'; credential: string };
    if (m.subject.kind === 'member') {
      const member = await this.members.findOne({ _id: m.subject.member_id });
      if (!member) throw new DomainError({ kind: 'NotFound', resource: 'member', id: m.subject.member_id });
      subject = { kind: 'member', memberId: member._id, orgId: member.org_id };
    } else {
      subject = { kind: 'operator', credential: m.subject.credential };
    }
    const sessionId = this.deps.ids.next('cs_');
    await this.deps.commands.handle(consoleSessionStream(sessionId), consoleSessionDecider, {
      type: 'StartConsoleSession',
      sessionId,
      tokenHash: m.token_hash,
      subject,
      expiresAt: m.expires_at,
      now: unixSeconds(this.deps.clock.now()),
    });
    const principal = await this.authenticateConsoleSession({ token_hash: m.token_hash });
    if (!principal) throw new DomainError({ kind: 'NotFound', resource: 'member', id: sessionId });
    return principal;
  }

  async authenticateConsoleSession(m: BillingMessage<'authenticateConsoleSession'>): Promise<ConsolePrincipal | null> {
    const session = await this.deps.readModels
      .collection<ConsoleSessionDoc>(Collections.consoleSessions)
      .findOne({ token_hash: m.token_hash });
    if (!session) return null;
    if (session.kind === 'operator') {
      return { kind: 'operator', session_id: session._id, credential: session.credential ?? '', expires_at: session.expires_at };
    }
    const member = await this.members.findOne({ _id: session.member_id ?? '' });
    const org = member && (await this.orgs.findOne({ _id: member.org_id }));
    if (!member || !org) return null;
    return {
      kind: 'member',
      session_id: session._id,
      expires_at: session.expires_at,
      member: toMember(member),
      organization: { id: org._id, name: org.name, tier: org.tier, limits: effectiveLimits(org.tier, org.custom_limits) },
    };
  }

  async endConsoleSession(m: BillingMessage<'endConsoleSession'>) {
    const session = await this.deps.readModels
      .collection<ConsoleSessionDoc>(Collections.consoleSessions)
      .findOne({ token_hash: m.token_hash });
    if (session) {
      await this.deps.commands.handle(consoleSessionStream(session._id), consoleSessionDecider, {
        type: 'EndConsoleSession',
        sessionId: session._id,
        now: unixSeconds(this.deps.clock.now()),
      });
    }
    return { ended: true };
  }

  /** Readiness: both stores answer. */
  async ping() {
    await Promise.all([this.deps.eventStore.ping(), this.deps.readModels.ping()]);
    return { status: 'ok' as const };
  }
}

const toOrganization = (doc: OrganizationDoc, alerts: AlertSettingsDoc | undefined): Organization => ({
  id: doc._id,
  object: 'organization',
  name: doc.name,
  tier: doc.tier,
  limits: effectiveLimits(doc.tier, doc.custom_limits),
  alerts: {
    monthly_budget: alerts?.monthly_budget_micros == null ? null : microsToUsd(alerts.monthly_budget_micros),
    budget_thresholds: alerts?.budget_thresholds ?? [...DEFAULT_BUDGET_THRESHOLDS],
    low_balance: alerts?.low_balance_micros == null ? null : microsToUsd(alerts.low_balance_micros),
  },
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

const toMember = (doc: MemberDoc): Member => ({
  id: doc._id,
  object: 'member',
  organization_id: doc.org_id,
  email: doc.email,
  name: doc.name,
  created: doc.created,
});

const toApiKey = (doc: ApiKeyDoc): Omit<ApiKey, 'budget' | 'spend'> => ({
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
  allowed_models: doc.allowed_models ?? null,
  usage: { requests: doc.requests },
});
