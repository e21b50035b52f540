import { createHmac } from 'node:crypto';
import type { WebhookEnvelope } from '@oc/contracts';

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

/** A POST as a receiver gets it: the envelope as the raw body, and the headers that sign and describe it. */
export interface SignedRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/**
 * The delivery request, signed in the spec's scheme and in Standard Webhooks'. Deliveries, the test
 * operation and `oc webhooks listen` (which forwards the event stream to a local URL) all build it here, so
 * a receiver cannot tell them apart but for `User-Agent`.
 */
export function signedRequest(
  url: string,
  envelope: WebhookEnvelope,
  secrets: readonly string[],
  nowSeconds: number,
  attempt: number,
  userAgent: string,
): SignedRequest {
  const body = JSON.stringify(envelope);
  return {
    url,
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': userAgent,
      'x-service-signature': serviceSignature(secrets, nowSeconds, body),
      'x-service-event-id': envelope.id,
      'x-service-event-type': envelope.type,
      'x-service-delivery-attempt': String(attempt),
      'webhook-id': envelope.id,
      'webhook-timestamp': String(nowSeconds),
      'webhook-signature': standardWebhookSignature(secrets, envelope.id, nowSeconds, body),
    },
  };
}
