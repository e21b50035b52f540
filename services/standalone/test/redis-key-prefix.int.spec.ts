import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { startStandalone } from '../src/standalone';

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

/** An operator running two deployments on one Redis gives each its REDIS_KEY_PREFIX. */
describe.skipIf(!redisUp)('REDIS_KEY_PREFIX', () => {
  it('begins every key the gateway writes for the requests it counts', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'oc-redis-prefix-'));
    const prefix = `oc-${randomBytes(6).toString('hex')}:`;
    const config = loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent', REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix });
    const app = await startStandalone({ config, demo: true });
    try {
      const organization = app.demo!.organization.id;
      const balance = await fetch(`${app.url}/v1/account/balance`, { headers: { authorization: `Bearer ${app.demo!.key}` } });
      expect(balance.status).toBe(200);
      // The organization's windows of the request just counted, and nothing of it under another prefix.
      const keys = await redis.keys(`*${organization}*`);
      expect(keys.sort()).toEqual([`${prefix}org_day_10000_86400:${organization}`, `${prefix}org_minute_100_60:${organization}`]);
    } finally {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
