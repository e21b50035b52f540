import { describe, expect, it } from 'vitest';
import { CircuitBreaker, DEFAULT_BREAKER } from '../src/breaker';
import { type DeploymentSpec, DeploymentPool } from '../src/pool';
import { ProviderError } from '../src/provider-error';

const down = new ProviderError({ kind: 'retryable', message: 'down', status: 503 });
const refused = new ProviderError({ kind: 'request', message: 'bad request', status: 400 });

const spec = (id: string, extra: Partial<DeploymentSpec<null>> = {}): DeploymentSpec<null> => ({ id, provider: id, model: `${id}-model`, weight: 1, target: null, ...extra });

/** A pool on a clock the test moves, and a random source that cycles through the given values. */
function pool(specs: Array<DeploymentSpec<null>>, randoms: number[] = [0]) {
  const clock = { now: 1_000_000 };
  let i = 0;
  const p = new DeploymentPool(specs, { now: () => clock.now, random: () => randoms[i++ % randoms.length]! });
  const next = (tried: Set<string> = new Set()) => {
    const got = p.acquire(() => true, tried);
    return got.lease;
  };
  return { p, clock, next };
}

describe('circuit breaker', () => {
  it('opens after consecutive failures, lets one trial through after the cool-down, and closes when it succeeds', () => {
    const b = new CircuitBreaker(DEFAULT_BREAKER);
    for (let i = 0; i < DEFAULT_BREAKER.consecutiveFailures - 1; i++) b.failure(0);
    expect(b.state(0)).toBe('closed');
    b.failure(0);
    expect(b.state(0)).toBe('open');
    expect(b.tryAcquire(DEFAULT_BREAKER.cooldownMs - 1)).toBe(false);
    expect(b.tryAcquire(DEFAULT_BREAKER.cooldownMs)).toBe(true);
    expect(b.state(DEFAULT_BREAKER.cooldownMs)).toBe('half_open');
    // One trial at a time.
    expect(b.tryAcquire(DEFAULT_BREAKER.cooldownMs)).toBe(false);
    b.success(DEFAULT_BREAKER.cooldownMs + 10);
    expect(b.state(DEFAULT_BREAKER.cooldownMs + 10)).toBe('closed');
  });

  it('opens again on a failed trial, for twice as long', () => {
    const b = new CircuitBreaker(DEFAULT_BREAKER);
    for (let i = 0; i < DEFAULT_BREAKER.consecutiveFailures; i++) b.failure(0);
    const trialAt = DEFAULT_BREAKER.cooldownMs;
    expect(b.tryAcquire(trialAt)).toBe(true);
    b.failure(trialAt);
    expect(b.state(trialAt + DEFAULT_BREAKER.cooldownMs)).toBe('open');
    expect(b.state(trialAt + 2 * DEFAULT_BREAKER.cooldownMs)).toBe('half_open');
  });

  it('opens on an error rate over the window even when failures are never consecutive enough', () => {
    const b = new CircuitBreaker(DEFAULT_BREAKER);
    // Fail, fail, succeed: two in three fail, never five in a row.
    for (let i = 0; i < 30 && b.state(i) === 'closed'; i++) {
      if (i % 3 === 2) b.success(i);
      else b.failure(i);
    }
    expect(b.state(30)).toBe('open');
  });

  it('stays closed under an error rate below the threshold', () => {
    const b = new CircuitBreaker(DEFAULT_BREAKER);
    for (let i = 0; i < 200; i++) {
      if (i % 4 === 0) b.failure(i);
      else b.success(i);
    }
    expect(b.state(200)).toBe('closed');
  });
});

describe('deployment pool', () => {
  it('shares first tries by weight', () => {
    const randoms = Array.from({ length: 100 }, (_, i) => i / 100);
    const { next } = pool([spec('a', { weight: 3 }), spec('b', { weight: 1 })], randoms);
    const counts = { a: 0, b: 0 };
    for (let i = 0; i < 100; i++) {
      const lease = next()!;
      counts[lease.id as 'a' | 'b']++;
      lease.succeeded(1);
    }
    expect(counts).toEqual({ a: 75, b: 25 });
  });

  it('uses a weight-0 deployment only when no weighted one may take the call, in catalog order', () => {
    const { next } = pool([spec('primary'), spec('second', { weight: 0 }), spec('third', { weight: 0 })]);
    expect(next()!.id).toBe('primary');
    expect(next(new Set(['primary']))!.id).toBe('second');
    expect(next(new Set(['primary', 'second']))!.id).toBe('third');
    expect(next(new Set(['primary', 'second', 'third']))).toBeNull();
  });

  it('skips a deployment whose breaker is open, and tries it again once after the cool-down', () => {
    const { p, clock, next } = pool([spec('a'), spec('b', { weight: 0 })]);
    for (let i = 0; i < DEFAULT_BREAKER.consecutiveFailures; i++) next()!.failed(down);
    expect(p.stats().find((s) => s.id === 'a')!.circuit).toBe('open');
    expect(next()!.id).toBe('b');
    clock.now += DEFAULT_BREAKER.cooldownMs;
    const trial = next()!;
    expect(trial.id).toBe('a');
    // While its trial runs, the others carry the traffic.
    expect(next()!.id).toBe('b');
    trial.succeeded(5);
    expect(p.stats().find((s) => s.id === 'a')!.circuit).toBe('closed');
    expect(next()!.id).toBe('a');
  });

  it("does not blame a deployment for a request the provider refused on its merits", () => {
    const { p, next } = pool([spec('a')]);
    for (let i = 0; i < 20; i++) next()!.failed(refused);
    expect(p.stats()[0]).toMatchObject({ circuit: 'closed', failures: 0, success_rate: 1 });
  });

  it("waits out a provider's Retry-After before sending it another call, and says when one could go", () => {
    const { clock, next, p } = pool([spec('a')]);
    next()!.failed(new ProviderError({ kind: 'retryable', message: 'slow down', status: 429, retryAfterMs: 30_000 }));
    const none = p.acquire(() => true, new Set());
    expect(none).toEqual({ lease: null, retryAt: clock.now + 30_000 });
    clock.now += 30_000;
    expect(next()!.id).toBe('a');
  });

  it('holds each deployment to its calls in flight and its calls per minute', () => {
    const { clock, next } = pool([spec('capped', { maxConcurrency: 2, rpm: 3 }), spec('spare', { weight: 0 })]);
    const first = next()!;
    const second = next()!;
    expect([first.id, second.id]).toEqual(['capped', 'capped']);
    expect(next()!.id).toBe('spare');
    first.succeeded(1);
    expect(next()!.id).toBe('capped');
    // Three started this minute: the fourth waits for the next one.
    second.succeeded(1);
    expect(next()!.id).toBe('spare');
    clock.now += 60_000;
    expect(next()!.id).toBe('capped');
  });

  it('reports success rate, latency percentiles and calls in flight', () => {
    const { p, next } = pool([spec('a')]);
    for (let i = 1; i <= 100; i++) next()!.succeeded(i);
    next()!.failed(down);
    const open = next()!;
    expect(p.stats()[0]).toMatchObject({ calls: 101, failures: 1, in_flight: 1, latency_ms: { p50: 51, p99: 100 } });
    expect(p.stats()[0]!.success_rate).toBeCloseTo(100 / 101);
    open.abandoned();
    expect(p.stats()[0]!.in_flight).toBe(0);
  });

  it('counts a lease once, however often it is reported', () => {
    const { p, next } = pool([spec('a')]);
    const lease = next()!;
    lease.failed(down);
    lease.failed(down);
    lease.succeeded(1);
    expect(p.stats()[0]).toMatchObject({ calls: 1, failures: 1, in_flight: 0 });
  });
});

describe("deployments' keys", () => {
  it("take the providers' usual variables from the validated settings only, and any other a catalog names from the process", async () => {
    const { providerEnvironment, deploymentKey } = await import('../src/catalog');
    const env = providerEnvironment({ FAL_KEY: 'from-settings' }, { GEMINI_API_KEY: 'stray', TEAM_FAL_KEY: 'from-process' });
    expect(deploymentKey({ provider: 'fal' }, env)).toBe('from-settings');
    expect(deploymentKey({ provider: 'gemini' }, env)).toBeUndefined();
    expect(deploymentKey({ provider: 'fal', api_key_env: 'TEAM_FAL_KEY' }, env)).toBe('from-process');
  });
});
