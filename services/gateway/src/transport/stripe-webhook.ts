import { ApiError, invalidRequest, Subjects, unwrap } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { sendError } from './http';

export const STRIPE_WEBHOOK_PATH = '/webhooks/stripe';

/** Stripe's event payloads are a few kilobytes; a body this large is not one of them. */
export const MAX_STRIPE_WEBHOOK_BYTES = 256 * 1024;

const tooLarge = () =>
  new ApiError({
    status: 413,
    type: 'invalid_request_error',
    code: 'request_too_large',
    message: `A Stripe webhook body is at most ${MAX_STRIPE_WEBHOOK_BYTES} bytes.`,
  });

/** The body exactly as sent: the signature covers its bytes, so it is neither parsed nor re-encoded here. */
function rawBody(req: Request): Promise<string> {
  if (Number(req.headers['content-length'] ?? 0) > MAX_STRIPE_WEBHOOK_BYTES) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_STRIPE_WEBHOOK_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')));
    req.on('error', reject);
  });
}

/**
 * `POST /webhooks/stripe`: Stripe's deliveries, authenticated by their `Stripe-Signature` (no API key). The gateway
 * holds no Stripe secret: billing verifies the signature on the raw body and decides what the event changes.
 */
export function stripeWebhook(services: ServiceClient, logger: Logger) {
  return async (req: Request, res: Response) => {
    try {
      const signature = req.headers['stripe-signature'];
      if (typeof signature !== 'string' || signature.length === 0) {
        throw invalidRequest('missing_signature', 'A Stripe webhook delivery carries a Stripe-Signature header; this request has none.', 'Stripe-Signature');
      }
      const payload = await rawBody(req);
      const answer = unwrap(await services.request(Subjects.billing.stripeWebhook, { payload, signature }));
      res.status(200).json(answer);
    } catch (error) {
      sendError(res, error, logger);
    }
  };
}
