import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A Checkout Session as the fake made it, with the form it was made from and the request's headers. */
export interface FakeCheckoutSession {
  object: Record<string, unknown> & { id: string; amount_total: number; client_reference_id: string | null; url: string };
  form: URLSearchParams;
  headers: IncomingMessage['headers'];
}

/**
 * The Stripe API endpoints billing calls, as Stripe's API reference describes them: form-encoded bodies
 * (`application/x-www-form-urlencoded`, nested parameters in brackets), Bearer authentication with the secret
 * key, `Idempotency-Key` (a repeat answers the first result), and errors as `{error: {type, message, param?}}`
 * with Stripe's statuses. Only `POST /v1/checkout/sessions` (mode `payment`).
 */
export async function startFakeStripe(secretKey: string) {
  const sessions: FakeCheckoutSession[] = [];
  const byIdempotencyKey = new Map<string, string>();
  let next = 0;

  const send = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake_${++next}` });
    res.end(JSON.stringify(body));
  };
  const stripeError = (type: string, message: string, param?: string) => ({ error: { type, message, ...(param ? { param } : {}) } });

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.headers.authorization !== `Bearer ${secretKey}`) {
        return send(res, 401, stripeError('invalid_request_error', 'Invalid API Key provided.'));
      }
      if (req.method !== 'POST' || req.url !== '/v1/checkout/sessions') {
        return send(res, 404, stripeError('invalid_request_error', `Unrecognized request URL (${req.method}: ${req.url}).`));
      }
      if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded')) {
        return send(res, 400, stripeError('invalid_request_error', 'Requests must be form-encoded.'));
      }
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const key = req.headers['idempotency-key'];
      const repeat = typeof key === 'string' ? byIdempotencyKey.get(key) : undefined;
      if (repeat) return send(res, 200, sessions.find((s) => s.object.id === repeat)!.object);
      for (const param of ['mode', 'success_url', 'line_items[0][price_data][currency]', 'line_items[0][price_data][unit_amount]', 'line_items[0][quantity]']) {
        if (!form.get(param)) return send(res, 400, stripeError('invalid_request_error', `Missing required param: ${param}.`, param));
      }
      if (form.get('mode') !== 'payment') return send(res, 400, stripeError('invalid_request_error', 'Only payment mode here.', 'mode'));
      const unitAmount = Number(form.get('line_items[0][price_data][unit_amount]'));
      const quantity = Number(form.get('line_items[0][quantity]'));
      if (!Number.isInteger(unitAmount) || unitAmount < 50) {
        return send(res, 400, stripeError('invalid_request_error', 'Invalid integer: unit_amount.', 'line_items[0][price_data][unit_amount]'));
      }
      const id = `cs_test_${String(sessions.length + 1).padStart(4, '0')}`;
      const object = {
        id,
        object: 'checkout.session',
        amount_subtotal: unitAmount * quantity,
        amount_total: unitAmount * quantity,
        client_reference_id: form.get('client_reference_id'),
        currency: form.get('line_items[0][price_data][currency]'),
        metadata: { organization_id: form.get('metadata[organization_id]') },
        mode: 'payment',
        payment_intent: null,
        payment_status: 'unpaid',
        status: 'open',
        success_url: form.get('success_url'),
        cancel_url: form.get('cancel_url'),
        url: `https://checkout.stripe.com/c/pay/${id}`,
        livemode: false,
      };
      sessions.push({ object, form, headers: req.headers });
      if (typeof key === 'string') byIdempotencyKey.set(key, id);
      send(res, 200, object);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sessions,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
