import type { CustomLimits, Scope, Tier } from '@oc/contracts';
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
  type: 'credit' | 'reservation' | 'capture' | 'release';
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
  [key: string]: unknown;
}

/** An open reservation, kept until it is captured or released, so that expired ones can be found. */
export interface OpenReservationDoc {
  /** `<org_id>/<reservation_id>`. */
  _id: string;
  org_id: string;
  reservation_id: string;
  /** Unix seconds. */
  expires_at: number;
  [key: string]: unknown;
}

export const Collections = {
  organizations: 'billing_organizations',
  ledger: 'billing_ledger_entries',
  apiKeys: 'billing_api_keys',
  openReservations: 'billing_open_reservations',
} as const;

/**
 * Each index serves one query of `application/billing.ts` (organizations newest first, an organization's
 * ledger and keys, a key by its hash, open reservations by expiry).
 */
export const billingCollections: CollectionSpec[] = [
  { name: Collections.organizations, indexes: [['created']] },
  { name: Collections.ledger, indexes: [['org_id', 'position']] },
  { name: Collections.apiKeys, indexes: [['key_hash'], ['org_id', 'created']] },
  { name: Collections.openReservations, indexes: [['expires_at']] },
];
