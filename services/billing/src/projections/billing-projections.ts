import { type BillingEvent, type ServedUsage, unixSeconds } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { documentProjection, type Projection } from '@oc/readmodel';
import {
  type ApiKeyDoc,
  Collections,
  type ConsoleSessionDoc,
  type DailySpendDoc,
  type KeyDailyUsageDoc,
  type KeySpendDoc,
  type LedgerEntryDoc,
  type MemberDoc,
  type OpenReservationDoc,
  type OrganizationDoc,
  type ProviderUsageFigures,
  type ProviderUsageTotalDoc,
  type ServedFigures,
} from './documents';

/** Reservation ids are chosen by the products, so only unique within an organization. */
const openReservationId = (orgId: string, reservationId: string) => `${orgId}/${reservationId}`;

/** Reservations made before they carried an expiry expire this long after they were made. */
export const LEGACY_RESERVATION_TTL_SECONDS = 3_600;

type Stored = StoredEvent & BillingEvent;

/**
 * Organizations with their balances, the ledger entry each money movement leaves behind, and the
 * reservations still open.
 */
export const accountsProjection: Projection = {
  name: 'billing-accounts',
  canHandle: [
    'OrganizationCreated',
    'TierChanged',
    'OrganizationLimitsChanged',
    'CreditsAdded',
    'FundsReserved',
    'ReservationCaptured',
    'ReservationReleased',
    'TopUpCredited',
    'TopUpReversed',
  ],
  async handle(stored, ctx) {
    const event = stored as Stored;
    const orgs = ctx.collection<OrganizationDoc>(Collections.organizations);
    if (event.type === 'OrganizationCreated') {
      await orgs.put({
        _id: event.data.org_id,
        name: event.data.name,
        tier: event.data.tier,
        created: event.data.created,
        balance_micros: 0,
        reserved_micros: 0,
      });
      return;
    }
    const org = await orgs.get((event.data as { org_id: string }).org_id);
    if (!org) return;
    const open = ctx.collection<OpenReservationDoc>(Collections.openReservations);
    let entry: Pick<LedgerEntryDoc, 'type' | 'amount_micros' | 'charged_micros' | 'description' | 'reference'> | undefined;
    switch (event.type) {
      case 'TierChanged':
        org.tier = event.data.tier;
        break;
      case 'OrganizationLimitsChanged':
        org.custom_limits = event.data.limits;
        break;
      case 'CreditsAdded':
        org.balance_micros += event.data.amount_micros;
        entry = { type: 'credit', amount_micros: event.data.amount_micros, charged_micros: 0, description: event.data.description, reference: null };
        break;
      case 'FundsReserved':
        await open.create({
          _id: openReservationId(org._id, event.data.reservation_id),
          org_id: org._id,
          reservation_id: event.data.reservation_id,
          expires_at: event.data.expires_at ?? unixSeconds(stored.created) + LEGACY_RESERVATION_TTL_SECONDS,
          holder: event.data.holder ?? null,
        });
        org.reserved_micros += event.data.amount_micros;
        entry = {
          type: 'reservation',
          amount_micros: -event.data.amount_micros,
          charged_micros: 0,
          description: event.data.description,
          reference: event.data.reservation_id,
        };
        break;
      case 'ReservationCaptured':
        await open.delete(openReservationId(org._id, event.data.reservation_id));
        org.balance_micros -= event.data.amount_micros;
        org.reserved_micros -= event.data.amount_micros + event.data.released_micros;
        entry = {
          type: 'capture',
          amount_micros: event.data.released_micros,
          charged_micros: event.data.amount_micros,
          description: 'Usage charged',
          reference: event.data.reservation_id,
        };
        break;
      case 'ReservationReleased':
        await open.delete(openReservationId(org._id, event.data.reservation_id));
        org.reserved_micros -= event.data.amount_micros;
        entry = {
          type: 'release',
          amount_micros: event.data.amount_micros,
          charged_micros: 0,
          description:
            event.data.reason === 'expired'
              ? 'Reservation expired: neither charged nor released in time, so billing released it'
              : 'Reservation released',
          reference: event.data.reservation_id,
        };
        break;
      case 'TopUpCredited':
        org.balance_micros += event.data.amount_micros;
        entry = { type: 'credit', amount_micros: event.data.amount_micros, charged_micros: 0, description: event.data.description, reference: event.data.payment_id };
        break;
      case 'TopUpReversed':
        org.balance_micros -= event.data.amount_micros;
        entry = {
          type: event.data.reason,
          amount_micros: -event.data.amount_micros,
          charged_micros: 0,
          description: event.data.description,
          reference: event.data.payment_id,
        };
        break;
    }
    await orgs.put(org);
    if (entry) {
      await ctx.collection<LedgerEntryDoc>(Collections.ledger).create({
        _id: `le_${stored.id}`,
        org_id: org._id,
        ...entry,
        available_after_micros: org.balance_micros - org.reserved_micros,
        created: unixSeconds(stored.created),
        position: stored.position,
      });
    }
  },
};

export const apiKeysProjection = documentProjection<ApiKeyDoc>({
  name: 'billing-api-keys',
  collection: Collections.apiKeys,
  canHandle: ['ApiKeyCreated', 'ApiKeyUpdated', 'ApiKeyRevoked', 'ApiKeyUsed', 'KeyBudgetChanged', 'ReservationCaptured'],
  documentId: (event) => {
    const data = event.data as { key_id?: string; usage?: { key_id?: string } };
    return data.key_id ?? data.usage?.key_id ?? null;
  },
  evolve(doc, stored) {
    const event = stored as Stored;
    switch (event.type) {
      case 'ApiKeyCreated':
        return {
          _id: event.data.key_id,
          org_id: event.data.org_id,
          key_hash: event.data.key_hash,
          name: event.data.name,
          mode: event.data.mode,
          prefix: event.data.prefix,
          scopes: event.data.scopes,
          rate_limit_per_minute: event.data.rate_limit_per_minute,
          created: event.data.created,
          expires_at: event.data.expires_at,
          last_used_at: null,
          revoked_at: null,
          requests: 0,
          allowed_models: event.data.allowed_models ?? null,
        };
      case 'ApiKeyUpdated':
        return (
          doc && {
            ...doc,
            ...(event.data.name !== undefined ? { name: event.data.name } : {}),
            ...(event.data.allowed_models !== undefined ? { allowed_models: event.data.allowed_models } : {}),
          }
        );
      case 'ApiKeyRevoked':
        return doc && { ...doc, revoked_at: event.data.revoked_at };
      case 'KeyBudgetChanged':
        return doc && { ...doc, budget: { daily: event.data.daily, monthly: event.data.monthly, total: event.data.total } };
      case 'ReservationCaptured':
        return doc && { ...doc, spend: spentAt(doc.spend, event.data.amount_micros, event.created) };
      case 'ApiKeyUsed':
        return (
          doc && {
            ...doc,
            requests: doc.requests + event.data.requests,
            last_used_at: Math.max(doc.last_used_at ?? 0, event.data.last_used_at),
          }
        );
      default:
        return doc;
    }
  },
});

/** A key's captured spend after one more capture at `at` (ms), its day and month rolled over by it. */
function spentAt(spend: KeySpendDoc | undefined, micros: number, at: number): KeySpendDoc {
  const day = utcDay(at);
  const month = day.slice(0, 7);
  return {
    day,
    day_micros: (spend?.day === day ? spend.day_micros : 0) + micros,
    month,
    month_micros: (spend?.month === month ? spend.month_micros : 0) + micros,
    total_micros: (spend?.total_micros ?? 0) + micros,
  };
}

/** The UTC day of a time in milliseconds, as `YYYY-MM-DD`. */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export const membersProjection = documentProjection<MemberDoc>({
  name: 'billing-members',
  collection: Collections.members,
  canHandle: ['MemberCreated', 'MemberRemoved'],
  documentId: (event) => (event.data as { member_id: string }).member_id,
  evolve(_doc, stored) {
    const event = stored as Stored;
    if (event.type !== 'MemberCreated') return null;
    const { member_id, org_id, email, name, password_hash, created } = event.data;
    return { _id: member_id, org_id, email, name, password_hash, created };
  },
});

export const consoleSessionsProjection = documentProjection<ConsoleSessionDoc>({
  name: 'billing-console-sessions',
  collection: Collections.consoleSessions,
  canHandle: ['ConsoleSessionStarted', 'ConsoleSessionEnded'],
  documentId: (event) => (event.data as { session_id: string }).session_id,
  evolve(_doc, stored) {
    const event = stored as Stored;
    if (event.type !== 'ConsoleSessionStarted') return null;
    const { session_id, token_hash, kind, member_id, org_id, credential, expires_at } = event.data;
    return { _id: session_id, token_hash, kind, member_id, org_id, credential, expires_at };
  },
});

/**
 * The console's figures by UTC day: what captures charged each organization and what served them, and each key's
 * requests. Captures without usage (made before providers, or by products that report none) add only the charge.
 */
export const dailyFiguresProjection: Projection = {
  name: 'billing-daily-figures',
  canHandle: ['ReservationCaptured', 'ApiKeyUsed'],
  async handle(stored, ctx) {
    const event = stored as Stored;
    if (event.type === 'ReservationCaptured') {
      const { org_id, amount_micros, usage } = event.data;
      if (amount_micros === 0 && !usage) return;
      const day = utcDay(stored.created);
      const spend = ctx.collection<DailySpendDoc>(Collections.dailySpend);
      const id = `${org_id}/${day}`;
      const doc = (await spend.get(id)) ?? { _id: id, org_id, day, charged_micros: 0 };
      doc.charged_micros += amount_micros;
      if (usage) {
        // JSON keeps the key unambiguous whatever characters a deployment's or provider's name holds.
        const key = JSON.stringify([usage.model, usage.provider, usage.deployment]);
        doc.served ??= {};
        doc.served[key] = withCapture(doc.served[key] ?? noFigures(), usage, amount_micros);
      }
      await spend.put(doc);
    } else if (event.type === 'ApiKeyUsed') {
      const day = utcDay(event.data.last_used_at * 1000);
      const usage = ctx.collection<KeyDailyUsageDoc>(Collections.keyDailyUsage);
      const id = `${event.data.key_id}/${day}`;
      const doc = (await usage.get(id)) ?? { _id: id, org_id: event.data.org_id, key_id: event.data.key_id, day, requests: 0 };
      await usage.put({ ...doc, requests: doc.requests + event.data.requests });
    }
  },
};

const withCapture = <T extends ServedFigures>(figures: T, usage: ServedUsage, chargedMicros: number): T => ({
  ...figures,
  requests: figures.requests + 1,
  input_tokens: figures.input_tokens + (usage.input_tokens ?? 0),
  output_tokens: figures.output_tokens + (usage.output_tokens ?? 0),
  seconds: figures.seconds + (usage.seconds ?? 0),
  revenue_micros: figures.revenue_micros + chargedMicros,
  provider_cost_micros: figures.provider_cost_micros + usage.provider_cost_micros,
});

const noFigures = (): ServedFigures => ({ requests: 0, input_tokens: 0, output_tokens: 0, seconds: 0, revenue_micros: 0, provider_cost_micros: 0 });

/**
 * What each deployment served per UTC day over every organization, from the usage that captures carry (each
 * organization's own figures are in its daily spend).
 */
export const providerUsageProjection: Projection = {
  name: 'billing-provider-usage',
  canHandle: ['ReservationCaptured'],
  async handle(stored, ctx) {
    const event = stored as Stored;
    if (event.type !== 'ReservationCaptured' || !event.data.usage) return;
    const { usage, amount_micros } = event.data;
    const day = utcDay(stored.created);
    const totals = ctx.collection<ProviderUsageTotalDoc>(Collections.providerUsageTotals);
    const id = JSON.stringify([day, usage.model, usage.provider, usage.deployment]);
    const doc = (await totals.get(id)) ?? { _id: id, day, model: usage.model, provider: usage.provider, deployment: usage.deployment, ...noFigures() };
    await totals.put(withCapture(doc, usage, amount_micros));
  },
};

export const billingProjections = [
  accountsProjection,
  apiKeysProjection,
  membersProjection,
  consoleSessionsProjection,
  dailyFiguresProjection,
  providerUsageProjection,
];
