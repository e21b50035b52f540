import { z } from 'zod';

/**
 * What a capture paid for, recorded beside it: the public model, the deployment and provider that served it, the
 * units, what the provider charges us for them (integer micro-USD), and the API key that asked for it. Captures
 * from before providers, and those of products that report nothing, have none.
 */
export const ServedUsageSchema = z.object({
  product: z.enum(['chat', 'text', 'video']),
  model: z.string().min(1).max(100),
  deployment: z.string().min(1).max(100),
  provider: z.string().min(1).max(50),
  upstream_model: z.string().min(1).max(200),
  input_tokens: z.int().nonnegative().optional(),
  output_tokens: z.int().nonnegative().optional(),
  seconds: z.int().nonnegative().optional(),
  provider_cost_micros: z.int().nonnegative(),
  /** Absent on captures recorded before they named their key, and from callers of an earlier release. */
  key_id: z.string().min(1).max(100).optional(),
});
export type ServedUsage = z.infer<typeof ServedUsageSchema>;
import { UsageQuery, USAGE_GROUPS } from './providers';
import { ConsoleUsageQuery, KEY_USAGE_GROUPS } from './usage';
import { PaymentEvents } from './payments';
import { AutoRechargeEvents } from './auto-recharge';
import { BillingAlertEvents, OrganizationAlertsSchema } from './billing-alerts';
import { AllowedModelsSchema, UpdateApiKeyMessage } from './key-access';
import { KeyBudgetBody, KeyBudgetMicrosSchema, KeyBudgetSchema, KeySpendSchema } from './key-budget';
import { ScopeSchema } from './scopes';
import { CustomLimitsSchema, OrganizationLimitsSchema, TierSchema } from './tiers';

// ---------- HTTP bodies (admin API and /v1/account) ----------

export const CreateOrganizationBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  tier: TierSchema.default('free'),
});

/** Any subset of the custom figures; null gives a figure back to the tier. */
export const LimitsChange = z.strictObject(CustomLimitsSchema.partial().shape);
export type LimitsChange = z.infer<typeof LimitsChange>;

/**
 * Either or both: a new tier, and (enterprise only) custom limits. Leaving enterprise clears its custom
 * limits. A body that changes nothing answers the organization as it is.
 */
export const UpdateOrganizationBody = z.strictObject({
  tier: TierSchema.optional(),
  limits: LimitsChange.optional(),
});

/** A positive USD amount that micro-dollars hold exactly. */
export const UsdAmount = z
  .number()
  .positive()
  .max(1_000_000)
  .refine((usd) => Math.abs(Math.round(usd * 1e6) - usd * 1e6) < 1e-3, 'at most 6 decimal places');

export const AddCreditsBody = z.strictObject({
  amount: UsdAmount,
  description: z.string().trim().max(500).default('Credit'),
});

export const CreateApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  scopes: z.array(ScopeSchema).min(1),
  rate_limit_per_minute: z.int().min(1).max(100_000).optional(),
  expires_in_days: z.int().min(1).max(3650).optional(),
  mode: z.enum(['live', 'test']).default('live'),
  /** Absent or null: every model. */
  allowed_models: AllowedModelsSchema.optional(),
  /** In USD; a period absent or null has no limit. */
  budget: KeyBudgetBody.optional(),
});

/** An email address as members sign in with it: trimmed and lower-cased, so one address is one member. */
export const EmailSchema = z.string().trim().toLowerCase().pipe(z.email().max(254));

/** Long enough to resist guessing within the sign-in limits, short enough to bound hashing work. */
export const PasswordSchema = z.string().min(12).max(256);

export const CreateMemberBody = z.strictObject({
  email: EmailSchema,
  name: z.string().trim().min(1).max(200).optional(),
  password: PasswordSchema,
});

export const MemberSchema = z.object({
  id: z.string(),
  object: z.literal('member'),
  organization_id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  created: z.int(),
});
export type Member = z.infer<typeof MemberSchema>;

/** What captures charged an organization per UTC day, oldest first, every day of the window present. */
export const DailySpendSchema = z.object({
  object: z.literal('daily_spend'),
  organization_id: z.string(),
  days: z.array(z.object({ date: z.string(), amount: z.number() })),
  total: z.number(),
  currency: z.literal('usd'),
});
export type DailySpend = z.infer<typeof DailySpendSchema>;

/** Requests each key made per UTC day (as gateways reported them), oldest first; days without requests left out. */
export const KeyDailyUsageSchema = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ key_id: z.string(), date: z.string(), requests: z.int() })),
  has_more: z.boolean(),
});
export type KeyDailyUsage = z.infer<typeof KeyDailyUsageSchema>;

export const DaysQuery = z.object({ days: z.coerce.number().int().min(1).max(90).default(30) });

export const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().max(200).optional(),
});

/**
 * GET /admin/v1/organizations: newest first; with `q`, the organization whose id it is and those whose name
 * starts with it (in any case), by name.
 */
export const OrganizationsQuery = ListQuery.extend({ q: z.string().trim().min(1).max(200).optional() });

export const OrganizationSchema = z.object({
  id: z.string(),
  object: z.literal('organization'),
  name: z.string(),
  tier: TierSchema,
  /** The figures that apply: the tier's, or an enterprise organization's custom ones. */
  limits: OrganizationLimitsSchema,
  /** Its monthly budget with alert thresholds, and its low-balance alert. */
  alerts: OrganizationAlertsSchema,
  created: z.int(),
});
export type Organization = z.infer<typeof OrganizationSchema>;

/** An organization in the operators' list, with its balance in USD: what it can spend, and what running work holds. */
export const ListedOrganizationSchema = OrganizationSchema.extend({
  balance: z.object({ available: z.number(), reserved: z.number() }),
});

export const BalanceSchema = z.object({
  object: z.literal('balance'),
  organization_id: z.string(),
  available: z.number(),
  reserved: z.number(),
  currency: z.literal('usd'),
  tier: TierSchema,
});
export type Balance = z.infer<typeof BalanceSchema>;

/** `refund` and `dispute`: a Stripe top-up's money taken back (see `TopUpReversed`). */
export const LedgerEntryType = z.enum(['credit', 'reservation', 'capture', 'release', 'refund', 'dispute']);

export const LedgerEntrySchema = z.object({
  id: z.string(),
  object: z.literal('ledger_entry'),
  type: LedgerEntryType,
  /** Signed change to the available balance, USD: a reservation holds funds, a capture returns what was not used. */
  amount: z.number(),
  /** USD actually charged by this entry: the captured amount of a capture, 0 otherwise. */
  charged: z.number(),
  /** Available balance after this entry, USD. */
  available_after: z.number(),
  description: z.string(),
  reference: z.string().nullable(),
  created: z.int(),
});
export type LedgerEntry = z.infer<typeof LedgerEntrySchema>;

export const ApiKeySchema = z.object({
  id: z.string(),
  object: z.literal('api_key'),
  name: z.string(),
  mode: z.enum(['live', 'test']),
  prefix: z.string(),
  scopes: z.array(ScopeSchema),
  rate_limit_per_minute: z.int(),
  created: z.int(),
  expires_at: z.int().nullable(),
  last_used_at: z.int().nullable(),
  revoked_at: z.int().nullable(),
  /** Null: every model. */
  allowed_models: z.array(z.string()).nullable(),
  /** In USD per UTC day, UTC calendar month and all time; null: no limit. */
  budget: KeyBudgetSchema,
  /** What the key's captured requests cost, in USD, today and this month (UTC) and in all. */
  spend: KeySpendSchema,
  usage: z.object({ requests: z.int() }),
});
export type ApiKey = z.infer<typeof ApiKeySchema>;

export const CreatedApiKeySchema = ApiKeySchema.extend({ key: z.string() });
export type CreatedApiKey = z.infer<typeof CreatedApiKeySchema>;

export const listOf = <T extends z.ZodType>(item: T) =>
  z.object({ object: z.literal('list'), data: z.array(item), has_more: z.boolean() });

// ---------- NATS request/reply messages to the billing service ----------

const OrgRef = { org_id: z.string().min(1) };

/**
 * Who holds a reservation while its work runs: a product's running process, named
 * `<service>/<replica>/<run>`. After a crash, the replica (or, once it is gone, another replica) releases
 * what that process held, without waiting for the reservation's expiry.
 */
export const HolderSchema = z.string().min(1).max(200);

export const BillingMessages = {
  createOrganization: CreateOrganizationBody,
  listOrganizations: OrganizationsQuery,
  getOrganization: z.object(OrgRef),
  updateOrganization: UpdateOrganizationBody.extend(OrgRef),
  addCredits: z.object({ ...OrgRef, amount_micros: z.int().positive(), description: z.string() }),
  listLedger: ListQuery.extend(OrgRef),
  getBalance: z.object(OrgRef),
  createApiKey: CreateApiKeyBody.extend({ ...OrgRef, budget: KeyBudgetMicrosSchema.optional() }),
  listApiKeys: z.object(OrgRef),
  revokeApiKey: z.object({ ...OrgRef, key_id: z.string().min(1) }),
  updateApiKey: UpdateApiKeyMessage,
  /** The gateway hashes the presented key; the key itself never travels past the gateway. */
  authenticate: z.object({ key_hash: z.string().length(64) }),
  recordKeyUsage: z.object({
    usage: z.array(z.object({ key_id: z.string(), requests: z.int().positive(), last_used_at: z.int() })).max(10_000),
  }),
  /**
   * Reserve funds ahead of work whose price is known or bounded; idempotent on reservation_id. A
   * reservation neither captured nor released by `expires_at` (unix seconds; by default an hour after it was
   * made) is released by billing itself.
   */
  reserveFunds: z.object({
    ...OrgRef,
    reservation_id: z.string().min(1),
    amount_micros: z.int().positive(),
    description: z.string(),
    expires_at: z.int().positive().optional(),
    holder: HolderSchema.optional(),
    /** The API key the work is for: its budget, if it has one, is checked, and the hold counted in its spend. */
    key_id: z.string().min(1).max(100).optional(),
    /**
     * Answer once decided, while the reservation is still being stored: for a caller in billing's own process,
     * whose next step (the upstream call) then overlaps the store's commit. Billing honours it only there
     * (`BillingRuntime.callersInProcess`), never across processes, where billing could fail alone and lose it.
     */
    answer_when_decided: z.boolean().optional(),
  }),
  /** Capture part or all of a reservation; the rest goes back to the available balance. */
  captureReservation: z.object({
    ...OrgRef,
    reservation_id: z.string().min(1),
    amount_micros: z.int().nonnegative(),
    usage: ServedUsageSchema.optional(),
    /**
     * As for `reserveFunds`: answer once decided, while the capture is still being stored, for a caller in
     * billing's own process. Chat's next append (the session's exchange) then joins the same group commit,
     * behind the capture: the event store never stores it without the capture (decisions.md).
     */
    answer_when_decided: z.boolean().optional(),
  }),
  releaseReservation: z.object({ ...OrgRef, reservation_id: z.string().min(1) }),
  /** The holders of open reservations whose names start with `prefix` (`chat/`), at most 1,000. */
  listReservationHolders: z.object({ prefix: z.string().min(1).max(200) }),
  /** Releases the open reservations of one holder (at most 500 a call; `more` says whether some are left). */
  releaseHeldReservations: z.object({ holder: HolderSchema }),
  dailySpend: DaysQuery.extend(OrgRef),
  keyDailyUsage: DaysQuery.extend(OrgRef),
  /** `UsageQuery` as the gateway parsed it (`group_by` a list); billing fills in the days left out, by its clock. */
  providerUsage: UsageQuery.omit({ format: true }).extend({ group_by: z.array(z.enum(USAGE_GROUPS)) }),
  /** `ConsoleUsageQuery` as the gateway parsed it, for one organization. */
  keyUsage: ConsoleUsageQuery.omit({ format: true }).extend({ ...OrgRef, group_by: z.array(z.enum(KEY_USAGE_GROUPS)) }),
  /** The gateway hashes the password (scrypt); the password itself never travels past the gateway. */
  createMember: z.object({ ...OrgRef, email: EmailSchema, name: z.string().nullable(), password_hash: z.string().min(1) }),
  listMembers: z.object(OrgRef),
  removeMember: z.object({ ...OrgRef, member_id: z.string().min(1) }),
  /** For the gateway's sign-in only: the member with this email and its password hash, or null. */
  memberCredentials: z.object({ email: EmailSchema }),
  /** Records a console session; the gateway keeps the token (in the browser's cookie) and sends its hash. */
  startConsoleSession: z.object({
    token_hash: z.string().length(64),
    subject: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('member'), member_id: z.string().min(1) }),
      /** `credential`: SHA-256 of the admin token signed in with, so a new ADMIN_TOKEN ends older sessions. */
      z.object({ kind: z.literal('operator'), credential: z.string().length(64) }),
    ]),
    expires_at: z.int().positive(),
  }),
  /** The session's principal, or null when it is unknown, ended, or its member was removed. Expiry is the gateway's check. */
  authenticateConsoleSession: z.object({ token_hash: z.string().length(64) }),
  endConsoleSession: z.object({ token_hash: z.string().length(64) }),
} as const;

export type BillingMessage<K extends keyof typeof BillingMessages> = z.infer<(typeof BillingMessages)[K]>;

/** What the gateway learns about a key: enough to authorize and rate-limit without another hop. */
export const KeyPrincipalSchema = z.object({
  key_id: z.string(),
  org_id: z.string(),
  mode: z.enum(['live', 'test']),
  scopes: z.array(ScopeSchema),
  rate_limit_per_minute: z.int(),
  tier: TierSchema,
  /** The organization's figures as they apply now (its tier's, or custom ones). */
  limits: OrganizationLimitsSchema,
  expires_at: z.int().nullable(),
  /** Null: every model (and absent from a billing of an earlier release). */
  allowed_models: z.array(z.string()).nullable().default(null),
});
export type KeyPrincipal = z.infer<typeof KeyPrincipalSchema>;

/** Who a console session is: an operator (the admin token's rights) or a member of one organization. */
export const ConsolePrincipalSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('operator'),
    session_id: z.string(),
    credential: z.string(),
    expires_at: z.int(),
  }),
  z.object({
    kind: z.literal('member'),
    session_id: z.string(),
    expires_at: z.int(),
    member: MemberSchema,
    organization: z.object({ id: z.string(), name: z.string(), tier: TierSchema, limits: OrganizationLimitsSchema }),
  }),
]);
export type ConsolePrincipal = z.infer<typeof ConsolePrincipalSchema>;

export const ReservationSchema = z.object({
  reservation_id: z.string(),
  amount: z.number(),
  available: z.number(),
});

// ---------- Domain events of the billing service ----------

/**
 * The stream categories billing writes (`account-<org_id>`, `apikey-<key_id>`, `member-<hash of the email>`,
 * `consolesession-<session_id>`): its outbox relay publishes these only.
 */
export const BillingStreams = { account: 'account', apiKey: 'apikey', member: 'member', consoleSession: 'consolesession', payment: 'payment', alerts: 'billingalerts', autoRecharge: 'autorecharge' } as const;

export const BillingEvents = {
  OrganizationCreated: z.object({ org_id: z.string(), name: z.string(), tier: TierSchema, created: z.int() }),
  TierChanged: z.object({ org_id: z.string(), tier: TierSchema }),
  /** The organization's custom limits after the change, every figure stated (null: the tier's). */
  OrganizationLimitsChanged: z.object({ org_id: z.string(), limits: CustomLimitsSchema }),
  CreditsAdded: z.object({ org_id: z.string(), amount_micros: z.int().positive(), description: z.string() }),
  FundsReserved: z.object({
    org_id: z.string(),
    reservation_id: z.string(),
    amount_micros: z.int().positive(),
    description: z.string(),
    /** Unix seconds; absent on reservations made before reservations expired. */
    expires_at: z.int().optional(),
    /** Unix seconds; the account's clock for forgetting long-settled reservations. Absent on older events. */
    reserved_at: z.int().optional(),
    /** Absent when no running process holds it (a video job's, owned by its stream). */
    holder: HolderSchema.optional(),
    /** The API key the work is for; absent before reservations named it, and for work of no key. */
    key_id: z.string().optional(),
  }),
  ReservationCaptured: z.object({
    org_id: z.string(),
    reservation_id: z.string(),
    amount_micros: z.int().nonnegative(),
    released_micros: z.int().nonnegative(),
    usage: ServedUsageSchema.optional(),
    /** Unix seconds; how long the account recognises a repeat is counted from it. Absent on older events. */
    settled_at: z.int().optional(),
  }),
  ReservationReleased: z.object({
    org_id: z.string(),
    reservation_id: z.string(),
    amount_micros: z.int().positive(),
    /** `expired`: released by billing because its product neither captured nor released it in time. */
    reason: z.enum(['released', 'expired']).optional(),
    /** Unix seconds, as on `ReservationCaptured`. */
    settled_at: z.int().optional(),
  }),
  ApiKeyCreated: z.object({
    key_id: z.string(),
    org_id: z.string(),
    name: z.string(),
    mode: z.enum(['live', 'test']),
    prefix: z.string(),
    key_hash: z.string(),
    scopes: z.array(ScopeSchema),
    rate_limit_per_minute: z.int(),
    expires_at: z.int().nullable(),
    created: z.int(),
    /** Absent on keys made before keys could be limited to models: every model. */
    allowed_models: z.array(z.string()).nullable().optional(),
  }),
  /** What changed: a field absent did not. */
  ApiKeyUpdated: z.object({
    key_id: z.string(),
    org_id: z.string(),
    name: z.string().optional(),
    allowed_models: z.array(z.string()).nullable().optional(),
    updated_at: z.int(),
  }),
  /**
   * A key's budget, on the account's stream (where reservations are decided): every period's limit in micro-USD
   * as it is after the change, null for none.
   */
  KeyBudgetChanged: z.object({
    org_id: z.string(),
    key_id: z.string(),
    daily: z.int().nullable(),
    monthly: z.int().nullable(),
    total: z.int().nullable(),
  }),
  ApiKeyRevoked: z.object({ key_id: z.string(), org_id: z.string(), revoked_at: z.int() }),
  ApiKeyUsed: z.object({ key_id: z.string(), org_id: z.string(), requests: z.int().positive(), last_used_at: z.int() }),
  /** A person who signs in to the console with this email and password, with the organization's rights. */
  MemberCreated: z.object({
    member_id: z.string(),
    org_id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    /** scrypt, in the PHC string format (`$scrypt$ln=…,r=…,p=…$salt$hash`), made by the gateway. */
    password_hash: z.string(),
    created: z.int(),
  }),
  MemberRemoved: z.object({ member_id: z.string(), org_id: z.string(), removed_at: z.int() }),
  ConsoleSessionStarted: z.object({
    session_id: z.string(),
    token_hash: z.string(),
    kind: z.enum(['member', 'operator']),
    member_id: z.string().nullable(),
    org_id: z.string().nullable(),
    credential: z.string().nullable(),
    created: z.int(),
    expires_at: z.int(),
  }),
  ConsoleSessionEnded: z.object({ session_id: z.string(), ended_at: z.int() }),
  ...PaymentEvents,
  ...AutoRechargeEvents,
  ...BillingAlertEvents,
} as const;

export type BillingEventType = keyof typeof BillingEvents;
export type BillingEvent = {
  [K in BillingEventType]: { type: K; data: z.infer<(typeof BillingEvents)[K]> };
}[BillingEventType];
