import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_REDIS_KEY_PREFIX, RateLimits, redisReady } from '../src/application/rate-limits';
import type { LimitWindow } from '../src/domain/limits';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
const redisUp = await redis.connect().then(
  () => true,
  (error: unknown) => {
    if (process.env.REQUIRE_REDIS === '1') throw new Error(`REQUIRE_REDIS=1 but Redis is unreachable: ${String(error)}`);
    return false;
  },
);
afterAll(() => redis.disconnect());

const stores: [string, () => RateLimits][] = [
  ['memory', () => RateLimits.inMemory()],
  ...(redisUp ? [['redis', () => RateLimits.redis(redis)] as [string, () => RateLimits]] : []),
];

const unique = () => `s${Math.random().toString(36).slice(2)}`;
const window = (name: string, points: number, subject = unique()): LimitWindow => ({ name, subject, points, durationSeconds: 60 });

describe.each(stores)('rate limits (%s counters)', (_, make) => {
  it('reports the window with the least room left', async () => {
    const limits = make();
    const key = window('key_minute', 100);
    const org = window('org_minute', 10);
    const outcome = await limits.consume([key, org]);
    expect(outcome).toMatchObject({ allowed: true, headers: { limit: 10, remaining: 9 } });
    const now = Math.floor(Date.now() / 1000);
    expect(outcome.headers.reset).toBeGreaterThan(now);
    expect(outcome.headers.reset).toBeLessThanOrEqual(now + 61);
  });

  it('refuses when any window is full and says how long to wait', async () => {
    const limits = make();
    const tight = window('key_minute', 2);
    const loose = window('org_day', 1000);
    await limits.consume([tight, loose]);
    await limits.consume([tight, loose]);
    const refused = await limits.consume([tight, loose]);
    expect(refused).toMatchObject({ allowed: false, window: 'key_minute', headers: { limit: 2, remaining: 0 } });
    if (refused.allowed) return;
    expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
  });

  it('checks token budgets before a call and records the usage after it', async () => {
    const limits = make();
    const tokens = window('chat_tokens_day', 1000);
    expect(await limits.peek(tokens)).toMatchObject({ allowed: true, headers: { remaining: 1000 } });
    await limits.record(tokens, 600);
    expect(await limits.peek(tokens)).toMatchObject({ allowed: true, headers: { remaining: 400 } });
    await limits.record(tokens, 500);
    expect((await limits.peek(tokens)).allowed).toBe(false);
  });

  it('locks a subject out for a given time whatever its window had left, and counts lockouts without refusing', async () => {
    const limits = make();
    const failures = window('admin_auth_minute', 60);
    await limits.block(failures, 240);
    const refused = await limits.peek(failures);
    expect(refused).toMatchObject({ allowed: false });
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThan(230);
    expect((await limits.peek(window('admin_auth_minute', 60))).allowed).toBe(true);
    const lockouts = { ...window('admin_auth_minute_lockouts', 1), durationSeconds: 3600 };
    expect([await limits.increment(lockouts), await limits.increment(lockouts), await limits.increment(lockouts)]).toEqual([1, 2, 3]);
  });
});

// Counters in Redis are what lets several gateway replicas enforce one limit together.
describe.skipIf(!redisUp)('rate limits across gateways', () => {
  it('shares Redis counters between two gateway instances', async () => {
    const subject = unique();
    const a = RateLimits.redis(redis);
    const b = RateLimits.redis(redis);
    await a.consume([window('key_minute', 2, subject)]);
    await b.consume([window('key_minute', 2, subject)]);
    expect((await a.consume([window('key_minute', 2, subject)])).allowed).toBe(false);
  });

  it('lets exactly the limit through when two gateways, each on its own connection, share a burst', async () => {
    const subject = unique();
    // Each gateway as it starts: a connection of its own, counting only once Redis is ready.
    const connections = [0, 1].map(() => new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false }));
    try {
      expect(await Promise.all(connections.map((c) => redisReady(c)))).toEqual([true, true]);
      const gateways = connections.map((c) => RateLimits.redis(c));
      const outcomes = await Promise.all(
        Array.from({ length: 300 }, (_, i) => gateways[i % 2]!.consume([window('key_minute', 100, subject), window('org_minute', 2_000, `${subject}-org`)])),
      );
      expect(outcomes.filter((o) => o.allowed)).toHaveLength(100);
      expect(outcomes.filter((o) => !o.allowed).every((o) => !o.allowed && o.window === 'key_minute')).toBe(true);
    } finally {
      for (const c of connections) c.disconnect();
    }
  });
});

// REDIS_KEY_PREFIX: several deployments (staging and production) may share one Redis.
describe.skipIf(!redisUp)('the Redis key prefix', () => {
  it("begins every key a gateway writes, so that deployments sharing one Redis never count each other's requests", async () => {
    const subject = unique();
    const [staging, production] = [`oc-staging-${subject}:`, `oc-production-${subject}:`];
    const a = RateLimits.redis(redis, staging);
    const b = RateLimits.redis(redis, production);
    const minute = window('key_minute', 1, subject);
    expect((await a.consume([minute])).allowed).toBe(true);
    expect((await a.consume([minute])).allowed).toBe(false);
    // The other deployment's first request under the same key id is its own.
    expect((await b.consume([minute])).allowed).toBe(true);
    // Lockouts and their counts (failed authentications) are keys the gateway writes too.
    await a.block(window('admin_auth_minute', 60, subject), 60);
    await a.increment({ ...window('admin_auth_minute_lockouts', 1, subject), durationSeconds: 3600 });

    const keys = (await redis.keys(`*${subject}*`)).sort();
    expect(keys).toEqual(
      [
        `${production}key_minute_1_60:${subject}`,
        `${staging}admin_auth_minute_60_60:${subject}`,
        `${staging}admin_auth_minute_lockouts_1_3600:${subject}`,
        `${staging}key_minute_1_60:${subject}`,
      ].sort(),
    );
  });

  it('is oc_rl: unless set, the keys gateways wrote before the setting', async () => {
    const subject = unique();
    expect(DEFAULT_REDIS_KEY_PREFIX).toBe('oc_rl:');
    await RateLimits.redis(redis).consume([window('key_minute', 5, subject)]);
    expect(await redis.keys(`*${subject}*`)).toEqual([`oc_rl:key_minute_5_60:${subject}`]);
  });
});
