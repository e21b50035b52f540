import { createHmac } from 'node:crypto';

/**
 * The spec's (and Stripe's) scheme: `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the
 * whole `whsec_…` string. During a rotation grace period one `v1=` per live secret, no spaces, which
 * is the form the `stripe` SDK parses.
 */
export function serviceSignature(secrets: readonly string[], timestamp: number, rawBody: string): string {
  const v1 = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex')}`);
  return [`t=${timestamp}`, ...v1].join(',');
}

/**
 * Standard Webhooks (`webhook-signature`): `v1,<base64 HMAC-SHA256 of "<msg id>.<t>.<raw body>">`, keyed
 * with the base64-decoded part of the secret after `whsec_`, space-separated per secret.
 */
export function standardWebhookSignature(secrets: readonly string[], messageId: string, timestamp: number, rawBody: string): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      return `v1,${createHmac('sha256', key).update(`${messageId}.${timestamp}.${rawBody}`).digest('base64')}`;
    })
    .join(' ');
}

/** `whsec_` + base64 of 32 random bytes: usable as-is by Stripe's and Standard Webhooks' verifiers. */
export const formatSecret = (bytes: Buffer) => `whsec_${bytes.toString('base64')}`;
