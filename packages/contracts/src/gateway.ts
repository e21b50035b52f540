import { z } from 'zod';
import { EmailSchema, MemberSchema } from './billing';
import { OrganizationLimitsSchema, TierSchema } from './tiers';

/** `GET /v1/health`. */
export const HealthSchema = z.object({
  status: z.literal('ok'),
  version: z.string(),
  timestamp: z.iso.datetime(),
});

// ---------- The web console's own surface (`/console/v1`) ----------

/** Sign in as a member (email and password) or as an operator (the admin token). */
export const SignInBody = z.union([
  z.strictObject({ email: EmailSchema, password: z.string().min(1).max(256) }),
  z.strictObject({ admin_token: z.string().min(1).max(512) }),
]);

/** What the console learns about its session; `csrf_token` goes in `X-CSRF-Token` on every change. */
export const ConsoleSessionSchema = z.object({
  object: z.literal('console_session'),
  kind: z.enum(['member', 'operator']),
  expires_at: z.int(),
  csrf_token: z.string(),
  member: MemberSchema.nullable(),
  organization: z.object({ id: z.string(), name: z.string(), tier: TierSchema, limits: OrganizationLimitsSchema }).nullable(),
});
export type ConsoleSession = z.infer<typeof ConsoleSessionSchema>;

export const SignedOutSchema = z.object({ object: z.literal('console_session'), deleted: z.literal(true) });
