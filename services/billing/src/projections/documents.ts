import type { CustomLimits, KeyBudgetLimits, Scope, Tier } from '@oc/contracts';
import type { CollectionSpec } from '@oc/readmodel';

export interface OrganizationDoc {
  _id: string;
  name: string;
  tier: Tier;
  /** Absent on organizations projected before custom limits existed: they have none. */
  custom_limits?: CustomLimits;
  created: number;
  /** Credited minus captured, micro-USD. */
  balance_micros: number;
  reserved_micros: number;
  [key: string]: unknown;
}

export interface LedgerEntryDoc {
  _id: string;
  org_id: string;
  type: 'credit' | 'reservation' | 'capture' | 'release' | 'refund' | 'dispute';
  amount_micros: number;
  charged_micros: number;
  available_after_micros: number;
  description: string;
  reference: string | null;
  created: number;
  position: number;
  [key: string]: unknown;
}

export interface ApiKeyDoc {
  _id: string;
  org_id: string;
  key_hash: string;
  name: string;
  mode: 'live' | 'test';
  prefix: string;
  scopes: Scope[];
  rate_limit_per_minute: number;
  created: number;
  expires_at: number | null;
  last_used_at: number | null;
  revoked_at: number | null;
  requests: number;
  /** Null or absent (keys made before keys could be limited): every model. */
  allowed_models?: string[] | null;
  /** Micro-USD per period, null for none; absent on keys never given a budget. */
  budget?: KeyBudgetLimits;
  /** What the key's captures charged; absent before its first. */
  spend?: KeySpendDoc;
  [key: string]: unknown;
}

/** A key's captured spend in micro-USD: on `day` and in `month` (UTC, by capture), and in all. */
export interface KeySpendDoc {
  day: string;
  day_micros: number;
  month: string;
  month_micros: number;
  total_micros: number;
}

/** An open reservation, kept until it is captured or released, so that expired ones can be found. */
export interface OpenReservationDoc {
  /** `<org_id>/<reservation_id>`. */
  _id: string;
  org_id: string;
  reservation_id: string;
  /** Unix seconds. */
  expires_at: number;
  /** The running process that holds it, if any (`FundsReserved.holder`). */
  holder: string | null;
  [key: string]: unknown;
}

/** An active member; removing a member deletes its document. */
export interface MemberDoc {
  _id: string;
  org_id: string;
  email: string;
  name: string | null;
  password_hash: string;
  created: number;
  [key: string]: unknown;
}

/** An active console session; signing out deletes its document, expiry is checked by the gateway. */
export interface ConsoleSessionDoc {
  _id: string;
  token_hash: string;
  kind: 'member' | 'operator';
  member_id: string | null;
  org_id: string | null;
  credential: string | null;
  expires_at: number;
  [key: string]: unknown;
}

/**
 * What captures charged one organization on one UTC day, and what served them: one document for both, so that a
 * capture reads and writes one document of the organization's rather than two.
 */
export interface DailySpendDoc {
  /** `<org_id>/<YYYY-MM-DD>`. */
  _id: string;
  org_id: string;
  day: string;
  charged_micros: number;
  /** By deployment, keyed `[model, provider, deployment]` as JSON; absent on days before providers were recorded. */
  served?: Record<string, ServedFigures>;
  [key: string]: unknown;
}

/** Requests one key made on one UTC day, as gateways reported them. */
export interface KeyDailyUsageDoc {
  /** `<key_id>/<YYYY-MM-DD>`. */
  _id: string;
  org_id: string;
  key_id: string;
  day: string;
  requests: number;
  [key: string]: unknown;
}

/** What paid requests used, earned and cost us. */
export interface ServedFigures {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  seconds: number;
  /** What the captures charged, micro-USD. */
  revenue_micros: number;
  /** What the providers charge us for the same work, micro-USD. */
  provider_cost_micros: number;
}

/** The figures summed for one day and deployment. */
export interface ProviderUsageFigures extends ServedFigures {
  /** UTC day of the capture, `YYYY-MM-DD`. */
  day: string;
  /** The public model. */
  model: string;
  provider: string;
  deployment: string;
}

/**
 * The figures over every organization, so that a report on all of them reads one document per day and
 * deployment rather than one per organization too.
 */
export interface ProviderUsageTotalDoc extends ProviderUsageFigures {
  /** The key `[day, model, provider, deployment]` as JSON. */
  _id: string;
  [key: string]: unknown;
}

export const Collections = {
  organizations: 'billing_organizations',
  ledger: 'billing_ledger_entries',
  apiKeys: 'billing_api_keys',
  openReservations: 'billing_open_reservations',
  members: 'billing_members',
  consoleSessions: 'billing_console_sessions',
  dailySpend: 'billing_daily_spend',
  keyDailyUsage: 'billing_key_daily_usage',
  providerUsageTotals: 'billing_provider_usage_totals',
} as const;

/**
 * Each index serves one query of `application/billing.ts` (organizations newest first, an organization's
 * ledger and keys, a key by its hash, open reservations by expiry, a member by email and an organization's
 * members, a session by its token's hash, an organization's days of spend (with what served it) and of key usage, and
 * the days of provider usage over every organization).
 */
export const billingCollections: CollectionSpec[] = [
  { name: Collections.organizations, indexes: [['created']] },
  { name: Collections.ledger, indexes: [['org_id', 'position']] },
  { name: Collections.apiKeys, indexes: [['key_hash'], ['org_id', 'created']] },
  { name: Collections.openReservations, indexes: [['expires_at'], ['holder']] },
  { name: Collections.members, indexes: [['email'], ['org_id', 'created']] },
  { name: Collections.consoleSessions, indexes: [['token_hash']] },
  { name: Collections.dailySpend, indexes: [['org_id', 'day']] },
  { name: Collections.keyDailyUsage, indexes: [['org_id', 'day']] },
  { name: Collections.providerUsageTotals, indexes: [['day']] },
];
