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
 * with Stripe's statuses. `POST /v1/checkout/sessions` (mode `payment`, and mode `setup` for a `customer`),
 * `POST /v1/customers`, and `POST /v1/payment_intents` confirmed off-session (`confirm`, `off_session`) on Stripe's
 * test payment methods: `pm_card_visa` succeeds; `pm_card_chargeDeclined` answers 402 `card_error`
 * `card_declined` whose `error.payment_intent` is the failed PaymentIntent.
 */
/** A PaymentIntent as the fake made it, with the form it was made from and the request's headers. */
export interface FakePaymentIntent {
  object: Record<string, unknown> & { id: string; amount: number; status: string };
  form: URLSearchParams;
  headers: IncomingMessage['headers'];
}

export async function startFakeStripe(secretKey: string) {
  const sessions: FakeCheckoutSession[] = [];
  const customers: Array<{ id: string; form: URLSearchParams }> = [];
  const paymentIntents: FakePaymentIntent[] = [];
  const byIdempotencyKey = new Map<string, string>();
  /** What an idempotent request answered first, replayed on a repeat: status and body. */
  const answered = new Map<string, { status: number; body: unknown }>();
  /** PaymentIntent requests still to answer with Stripe's 500 `api_error` (which an idempotent retry may follow), and every one received. */
  let failingPaymentIntents = 0;
  const paymentIntentRequests: Array<{ idempotencyKey: string | undefined }> = [];
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
      const routes = ['/v1/checkout/sessions', '/v1/customers', '/v1/payment_intents'];
      if (req.method !== 'POST' || !routes.includes(req.url ?? '')) {
        return send(res, 404, stripeError('invalid_request_error', `Unrecognized request URL (${req.method}: ${req.url}).`));
      }
      if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded')) {
        return send(res, 400, stripeError('invalid_request_error', 'Requests must be form-encoded.'));
      }
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const key = req.headers['idempotency-key'];
      if (req.url === '/v1/payment_intents') {
        paymentIntentRequests.push({ idempotencyKey: typeof key === 'string' ? key : undefined });
        // Stripe saves no result for a request that failed with a 500, so a retry with the same key runs it anew.
        if (failingPaymentIntents > 0) {
          failingPaymentIntents -= 1;
          return send(res, 500, stripeError('api_error', 'An unknown error occurred.'));
        }
      }
      if (req.url === '/v1/customers' || req.url === '/v1/payment_intents') {
        const first = typeof key === 'string' ? answered.get(`${req.url} ${key}`) : undefined;
        if (first) return send(res, first.status, first.body);
        const [status, body] = req.url === '/v1/customers' ? createCustomer(form) : createPaymentIntent(form, req.headers);
        if (typeof key === 'string') answered.set(`${req.url} ${key}`, { status, body });
        return send(res, status, body);
      }
      const repeat = typeof key === 'string' ? byIdempotencyKey.get(key) : undefined;
      if (repeat) return send(res, 200, sessions.find((s) => s.object.id === repeat)!.object);
      if (form.get('mode') === 'setup') return createSetupSession(form, req.headers, key, res);
      for (const param of ['mode', 'success_url', 'line_items[0][price_data][currency]', 'line_items[0][price_data][unit_amount]', 'line_items[0][quantity]']) {
        if (!form.get(param)) return send(res, 400, stripeError('invalid_request_error', `Missing required param: ${param}.`, param));
      }
      if (form.get('mode') !== 'payment') return send(res, 400, stripeError('invalid_request_error', 'Only payment and setup modes here.', 'mode'));
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
  function createCustomer(form: URLSearchParams): [number, unknown] {
    const id = `cus_test_${String(customers.length + 1).padStart(4, '0')}`;
    customers.push({ id, form });
    return [200, { id, object: 'customer', name: form.get('name'), metadata: { organization_id: form.get('metadata[organization_id]') }, livemode: false }];
  }

  function createSetupSession(form: URLSearchParams, headers: IncomingMessage['headers'], key: string | string[] | undefined, res: import('node:http').ServerResponse) {
    for (const param of ['success_url', 'customer', 'currency']) {
      if (!form.get(param)) return send(res, 400, stripeError('invalid_request_error', `Missing required param: ${param}.`, param));
    }
    if (!customers.some((c) => c.id === form.get('customer'))) return send(res, 400, stripeError('invalid_request_error', `No such customer: '${form.get('customer')}'`, 'customer'));
    const repeat = typeof key === 'string' ? byIdempotencyKey.get(key) : undefined;
    if (repeat) return send(res, 200, sessions.find((s) => s.object.id === repeat)!.object);
    const id = `cs_test_${String(sessions.length + 1).padStart(4, '0')}`;
    const object = {
      id,
      object: 'checkout.session',
      amount_total: 0,
      client_reference_id: form.get('client_reference_id'),
      currency: form.get('currency'),
      customer: form.get('customer'),
      metadata: { organization_id: form.get('metadata[organization_id]') },
      mode: 'setup',
      payment_intent: null,
      payment_status: 'no_payment_required',
      setup_intent: `seti_test_${id}`,
      status: 'open',
      success_url: form.get('success_url'),
      cancel_url: form.get('cancel_url'),
      url: `https://checkout.stripe.com/c/pay/${id}`,
      livemode: false,
    };
    sessions.push({ object, form, headers });
    if (typeof key === 'string') byIdempotencyKey.set(key, id);
    send(res, 200, object);
  }

  function createPaymentIntent(form: URLSearchParams, headers: IncomingMessage['headers']): [number, unknown] {
    for (const param of ['amount', 'currency']) {
      if (!form.get(param)) return [400, stripeError('invalid_request_error', `Missing required param: ${param}.`, param)];
    }
    const amount = Number(form.get('amount'));
    if (!Number.isInteger(amount) || amount < 50) return [400, stripeError('invalid_request_error', 'Invalid integer: amount.', 'amount')];
    const customer = form.get('customer');
    if (customer && !customers.some((c) => c.id === customer)) return [400, stripeError('invalid_request_error', `No such customer: '${customer}'`, 'customer')];
    const paymentMethod = form.get('payment_method');
    const declined = paymentMethod === 'pm_card_chargeDeclined';
    const metadata: Record<string, string> = {};
    for (const [name, value] of form) {
      const m = /^metadata\[(.+)\]$/.exec(name);
      if (m) metadata[m[1]!] = value;
    }
    const id = `pi_test_${String(paymentIntents.length + 1).padStart(4, '0')}`;
    const confirmed = form.get('confirm') === 'true';
    const object = {
      id,
      object: 'payment_intent',
      amount,
      amount_received: confirmed && !declined ? amount : 0,
      currency: form.get('currency'),
      customer,
      payment_method: declined ? null : paymentMethod,
      metadata,
      status: !confirmed ? 'requires_confirmation' : declined ? 'requires_payment_method' : 'succeeded',
      last_payment_error: confirmed && declined ? { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' } : null,
      livemode: false,
    };
    paymentIntents.push({ object, form, headers });
    if (confirmed && declined) {
      return [402, { error: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.', payment_intent: object } }];
    }
    return [200, object];
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sessions,
    customers,
    paymentIntents,
    paymentIntentRequests,
    /** The next `n` PaymentIntent requests fail as Stripe's do when it cannot answer (500 `api_error`). */
    failPaymentIntents: (n: number) => {
      failingPaymentIntents = n;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
