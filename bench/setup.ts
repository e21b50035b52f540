/**
 * Set-up through the public admin API, as an operator would do it: enterprise organizations, each credited
 * and given a key, so that the load spreads over many organizations' windows and none of them refuses it.
 */
import type { Scope } from '@oc/contracts';
import { VIDEO_REQUEST } from './videos';

export interface Tenant {
  orgId: string;
  key: string;
  /** A video of the organization, for `GET /v1/videos/{id}`. */
  videoId: string;
}

const SCOPES: Scope[] = ['chat:read', 'chat:write', 'video:read', 'video:write', 'webhook:read', 'webhook:write'];
/** Plenty for every chat and video a full run buys (a long stream reserves about 0.40 USD). */
const CREDIT_USD = 100_000;
/**
 * Far above what any section can send: the enterprise tier's own 2,000 requests a minute, over 256
 * organizations, is ~8,500 req/s, which a GET section passed on a fast machine and answered 429.
 */
const LIMITS = {
  requests_per_minute: 100_000_000,
  requests_per_day: 1_000_000_000,
  chat_requests_per_minute: 100_000_000,
  chat_tokens_per_day: 1_000_000_000_000,
};

/**
 * Set-up is not measured, so a request that dies on its socket is sent once more: a server whose event loop
 * lags (catching up on a long history) may close an idle keep-alive connection just as it is reused. A
 * duplicate organization or video costs the bench nothing.
 */
async function send(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (first) {
    return fetch(url, init).catch((second: Error) => {
      const cause = (e: unknown) => String((e as Error & { cause?: unknown }).cause ?? e);
      throw new Error(`${init.method} ${url} failed twice: ${cause(first)}; then ${cause(second)}`);
    });
  }
}

export async function call<T>(origin: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await send(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Runs `work` over `items`, at most `limit` at a time, keeping the order of the results. */
export async function mapLimit<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

async function createTenant(origin: string, adminToken: string, index: number): Promise<Tenant> {
  const admin = <T>(method: string, path: string, body?: unknown) => call<T>(origin, adminToken, method, path, body);
  const org = await admin<{ id: string }>('POST', '/admin/v1/organizations', { name: `bench-${index}`, tier: 'enterprise' });
  await admin('PATCH', `/admin/v1/organizations/${org.id}`, { limits: LIMITS });
  await admin('POST', `/admin/v1/organizations/${org.id}/credits`, { amount: CREDIT_USD, description: 'Bench credit' });
  const { key } = await admin<{ key: string }>('POST', `/admin/v1/organizations/${org.id}/keys`, {
    name: 'bench',
    scopes: SCOPES,
    rate_limit_per_minute: 100_000,
  });
  const video = await call<{ id: string }>(origin, key, 'POST', '/v1/videos', VIDEO_REQUEST);
  return { orgId: org.id, key, videoId: video.id };
}

export function createTenants(origin: string, adminToken: string, count: number): Promise<Tenant[]> {
  return mapLimit(
    Array.from({ length: count }, (_, i) => i),
    8,
    (i) => createTenant(origin, adminToken, i),
  );
}

/** Webhooks for `video.completed` at the receiver, one per path; their secrets are not needed to count arrivals. */
export async function registerWebhooks(origin: string, key: string, receiverPort: number, paths: string[]): Promise<void> {
  for (const path of paths) {
    await call(origin, key, 'POST', '/v1/webhooks', { url: `http://127.0.0.1:${receiverPort}${path}`, events: ['video.completed'] });
  }
}
