import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');

/**
 * A newcomer starting a process with a missing or malformed variable: it stops before doing anything, with
 * exit code 78 and one line per problem naming the variable and what it expects; never a stack trace.
 */
describe('every process refuses a bad configuration with one line per variable', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'oc-config-'));
    // What `node services/webhook/dist/main.js` runs, as the README tells a newcomer.
    ensureBuilt('services/webhook');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  /** Runs `entry` (sources through tsx, or a built file) with only these variables set. */
  async function start(entry: string, env: Record<string, string>) {
    const args = entry.endsWith('.ts') ? ['--import', 'tsx', entry] : [entry];
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      // Nothing inherited: the test's own NATS_URL, DATA_DIR or tokens must not fill a gap.
      env: { PATH: process.env.PATH ?? '', DATA_DIR: join(dataDir, 'data'), NATS_URL: 'nats://127.0.0.1:1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    const [code] = (await once(child, 'exit')) as [number | null];
    return { code, stdout, stderr, lines: stderr.split('\n').filter((line) => line.length > 0) };
  }

  const cases: Array<{ name: string; entry: string; env: Record<string, string>; expected: RegExp[] }> = [
    {
      name: 'webhook (built) without WEBHOOK_SECRET_KEY in production mode',
      entry: 'services/webhook/dist/main.js',
      env: {},
      expected: [/^Invalid configuration: WEBHOOK_SECRET_KEY: required in production mode \(32 bytes .*\); set WEBHOOK_MODE=development to generate one/],
    },
    {
      name: 'webhook with a short key and private addresses in production mode',
      entry: 'services/webhook/src/main.ts',
      env: { WEBHOOK_SECRET_KEY: 'too-short', WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_RETRY_DELAYS_MS: '0,soon' },
      expected: [
        /^Invalid configuration: WEBHOOK_SECRET_KEY: must be 32 bytes as base64 or 64 hex digits/,
        /^Invalid configuration: WEBHOOK_RETRY_DELAYS_MS: .*entry 2 \(.*delays in milliseconds/,
        /^Invalid configuration: WEBHOOK_ALLOW_PRIVATE: 1 is allowed only with WEBHOOK_MODE=development/,
      ],
    },
    {
      name: 'gateway without ADMIN_TOKEN and with a bad port and proxy list',
      entry: 'services/gateway/src/main.ts',
      env: { PORT: '99999', TRUSTED_PROXIES: '10.0.0.0/8,balancer' },
      expected: [
        /^Invalid configuration: PORT: .*65535 \(a TCP port, 0 to 65535\)$/,
        /^Invalid configuration: ADMIN_TOKEN: required \(the operator token for \/admin\/v1, at least 16 characters\)$/,
        /^Invalid configuration: TRUSTED_PROXIES: must be comma-separated IP addresses or CIDRs/,
      ],
    },
    {
      name: 'gateway with a Redis key prefix holding a space',
      entry: 'services/gateway/src/main.ts',
      env: { ADMIN_TOKEN: 'a'.repeat(32), REDIS_KEY_PREFIX: 'oc staging:' },
      expected: [/^Invalid configuration: REDIS_KEY_PREFIX: .*\(1 to 64 printable characters without spaces, e\.g\. oc-staging:\)$/],
    },
    {
      name: 'start:distributed with two replicas and no Redis for their gateways to share',
      entry: 'scripts/start-distributed.mjs',
      env: { REPLICAS: '2' },
      expected: [/^Invalid configuration: REDIS_URL: required when REPLICAS is more than 1, so that the 2 gateways count rate limits together/],
    },
    {
      name: 'billing with an unknown log level',
      entry: 'services/billing/src/main.ts',
      env: { LOG_LEVEL: 'loud' },
      expected: [/^Invalid configuration: LOG_LEVEL: .*"info"/],
    },
    {
      name: 'chat with a context of 0 tokens',
      entry: 'services/chat/src/main.ts',
      env: { CHAT_CONTEXT_TOKENS: '0' },
      expected: [/^Invalid configuration: CHAT_CONTEXT_TOKENS: Too small/],
    },
    {
      name: 'video with the OpenAI upstream and no key',
      entry: 'services/video/src/main.ts',
      env: { VIDEO_PROVIDER: 'openai' },
      expected: [/^Invalid configuration: VIDEO_UPSTREAM_API_KEY: required when VIDEO_PROVIDER=openai/],
    },
    {
      name: 'standalone with a bad port and private addresses in production mode',
      entry: 'services/standalone/src/main.ts',
      env: { PORT: 'eighty', WEBHOOK_MODE: 'production', WEBHOOK_ALLOW_PRIVATE: '1' },
      expected: [/^Invalid configuration: PORT: .*\(a TCP port, 0 to 65535\)$/, /^Invalid configuration: WEBHOOK_ALLOW_PRIVATE: /],
    },
    {
      name: 'standalone with private addresses under NODE_ENV=production (webhooks in production mode)',
      entry: 'services/standalone/src/main.ts',
      env: { NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: '1' },
      expected: [/^Invalid configuration: WEBHOOK_ALLOW_PRIVATE: 1 is allowed only with WEBHOOK_MODE=development .*; the mode is production \(NODE_ENV=production\)$/],
    },
  ];

  it.each(cases)('$name', async ({ entry, env, expected }) => {
    const run = await start(join(ROOT, entry), env);
    expect(run.code, run.stderr).toBe(78);
    expect(run.lines).toHaveLength(expected.length);
    for (const [i, pattern] of expected.entries()) expect(run.lines[i]).toMatch(pattern);
    expect(run.stderr).not.toMatch(/^\s+at /m);
    expect(run.stdout).toBe('');
  });
});
