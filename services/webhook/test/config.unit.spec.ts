import { describe, expect, it } from 'vitest';
import { WebhookConfigSchema, webhookConfigChecks, webhookMode, webhookModeLine, webhookSettings } from '../src/config';

const KEY = Buffer.alloc(32, 3).toString('base64');
const settings = (env: Record<string, string>, defaultMode: 'production' | 'development') =>
  webhookSettings(WebhookConfigSchema.parse(env), defaultMode, KEY);

describe('webhook configuration', () => {
  it('defaults to the spec: at once, then 1 s, 5 s, 25 s; a 30 s deadline; disable after 10; no private addresses', () => {
    expect(settings({}, 'production')).toMatchObject({
      retryDelaysMs: [0, 1_000, 5_000, 25_000],
      timeoutMs: 30_000,
      disableAfterFailures: 10,
      allowPrivate: false,
    });
  });

  it('reads WEBHOOK_RETRY_DELAYS_MS as a comma-separated list', () => {
    expect(settings({ WEBHOOK_RETRY_DELAYS_MS: '0, 10,20' }, 'production').retryDelaysMs).toEqual([0, 10, 20]);
    expect(() => WebhookConfigSchema.parse({ WEBHOOK_RETRY_DELAYS_MS: '0,soon' })).toThrow();
  });

  it('allows private addresses only in development mode', () => {
    expect(() => settings({ WEBHOOK_ALLOW_PRIVATE: '1' }, 'production')).toThrow(/WEBHOOK_MODE=development/);
    expect(() => settings({ WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_MODE: 'production' }, 'development')).toThrow();
    expect(settings({ WEBHOOK_ALLOW_PRIVATE: '1' }, 'development').allowPrivate).toBe(true);
    expect(settings({ WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_MODE: 'development' }, 'production').allowPrivate).toBe(true);
  });

  it('follows NODE_ENV=production when WEBHOOK_MODE is unset; development only when asked for', () => {
    expect(webhookMode({}, 'development')).toEqual({ mode: 'development', because: 'the default without NODE_ENV=production' });
    expect(webhookMode({ NODE_ENV: 'production' }, 'development')).toEqual({ mode: 'production', because: 'NODE_ENV=production' });
    expect(webhookMode({ NODE_ENV: 'production', WEBHOOK_MODE: 'development' }, 'development').mode).toBe('development');
    expect(webhookMode({ NODE_ENV: 'development' }, 'production').mode).toBe('production');
    const standalone = (env: Record<string, string>) => webhookSettings({ ...WebhookConfigSchema.parse(env), NODE_ENV: env.NODE_ENV }, 'development', KEY);
    expect(() => standalone({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: '1' })).toThrow(/the mode is production \(NODE_ENV=production\)/);
    expect(standalone({ NODE_ENV: 'production', WEBHOOK_MODE: 'development', WEBHOOK_ALLOW_PRIVATE: '1' }).allowPrivate).toBe(true);
    expect(webhookConfigChecks('development')({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: '1' })).toEqual([
      { variable: 'WEBHOOK_ALLOW_PRIVATE', message: expect.stringMatching(/the mode is production \(NODE_ENV=production\)$/) },
    ]);
  });

  it('says which mode it runs in, and how to leave development mode on a server', () => {
    expect(webhookModeLine({ mode: 'production', because: 'NODE_ENV=production' }, false)).toMatch(/^Webhooks: production mode \(NODE_ENV=production\)/);
    expect(webhookModeLine(webhookMode({}, 'development'), true)).toMatch(
      /^Webhooks: development mode .*loopback receivers \(WEBHOOK_ALLOW_PRIVATE=1\); on a server, set NODE_ENV=production/,
    );
  });

  it('reads WEBHOOK_ALLOW_CIDRS as a list of CIDRs or addresses, and refuses anything else', () => {
    expect(settings({}, 'production').allowCidrs).toEqual([]);
    expect(settings({ WEBHOOK_ALLOW_CIDRS: '10.1.2.0/24, fd00::/8,192.168.7.7' }, 'production').allowCidrs).toEqual([
      '10.1.2.0/24',
      'fd00::/8',
      '192.168.7.7',
    ]);
    expect(() => WebhookConfigSchema.parse({ WEBHOOK_ALLOW_CIDRS: '10.0.0.0/33' })).toThrow(/CIDR/);
    expect(() => WebhookConfigSchema.parse({ WEBHOOK_ALLOW_CIDRS: 'intranet' })).toThrow(/CIDR/);
  });

  it('never waits longer than the spec’s 30 s for a receiver', () => {
    expect(() => WebhookConfigSchema.parse({ WEBHOOK_TIMEOUT_MS: '30001' })).toThrow();
  });
});
