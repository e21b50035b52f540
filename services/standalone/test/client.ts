import { expectConformance } from './conformance';
import type { RunningService } from './harness';

export interface Response<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** A thin fetch wrapper so scenarios read like what a developer types; every answer is checked against the OpenAPI document. */
export function clientFor(service: RunningService) {
  async function call<T = any>(
    method: string,
    path: string,
    options: { token?: string | null; body?: unknown; rawBody?: string; contentType?: string } = {},
  ): Promise<Response<T>> {
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.rawBody !== undefined) body = options.rawBody;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    const res = await fetch(`${service.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    // A GET answered with an event stream is a subscription that ends only when the client leaves: the test has
    // its status and headers, and reads its events itself (`openEventStream`) when it wants them.
    const subscription = method === 'GET' && res.status === 200 && /^text\/event-stream/.test(res.headers.get('content-type') ?? '');
    if (subscription) await res.body?.cancel();
    const text = subscription ? '' : await res.text();
    await expectConformance(service.url, method, new URL(path, service.url), res.status, res.headers, text);
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: the test sees the raw text.
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }

  const admin = <T = any>(method: string, path: string, body?: unknown) =>
    call<T>(method, `/admin/v1${path}`, { token: service.adminToken, ...(body !== undefined ? { body } : {}) });

  /** An organization with credit and a key with the given scopes: the usual starting point. */
  async function newCustomer(
    options: { tier?: string; credit?: number; scopes?: string[]; key?: Record<string, unknown>; limits?: Record<string, number> } = {},
  ) {
    const org = await admin('POST', '/organizations', { name: 'Acme', tier: options.tier ?? 'standard' });
    if (org.status !== 200) throw new Error(`create org: ${org.status} ${JSON.stringify(org.body)}`);
    if (options.limits) {
      const set = await admin('PATCH', `/organizations/${org.body.id}`, { limits: options.limits });
      if (set.status !== 200) throw new Error(`set limits: ${set.status} ${JSON.stringify(set.body)}`);
    }
    if (options.credit) await admin('POST', `/organizations/${org.body.id}/credits`, { amount: options.credit, description: 'Top-up' });
    const key = await admin('POST', `/organizations/${org.body.id}/keys`, {
      name: 'test key',
      scopes: options.scopes ?? ['video:read', 'chat:read'],
      ...options.key,
    });
    if (key.status !== 200) throw new Error(`create key: ${key.status} ${JSON.stringify(key.body)}`);
    return { orgId: org.body.id as string, key: key.body.key as string, keyId: key.body.id as string };
  }

  return { call, admin, newCustomer };
}
