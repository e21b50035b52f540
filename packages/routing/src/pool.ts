import type { DeploymentStatus } from '@oc/contracts';
import { type BreakerOptions, type BreakerState, CircuitBreaker, DEFAULT_BREAKER } from './breaker';
import { ProviderError } from './provider-error';

/** One deployment as the router sees it: who serves, how much traffic it takes, and what it may carry. */
export interface DeploymentSpec<T> {
  /** Unique within the catalog; recorded on every request it serves. */
  id: string;
  /** `openai`, `anthropic`, `gemini`, `fal`, `replicate`, `simulator`. */
  provider: string;
  /** The provider's own model id. */
  model: string;
  /** Share of first tries among the available deployments; 0: only when every weighted one is unavailable. */
  weight: number;
  /** Calls in flight at once in this process; unlimited when absent. */
  maxConcurrency?: number | undefined;
  /** Calls started per minute in this process; unlimited when absent. */
  rpm?: number | undefined;
  target: T;
}

export interface DeploymentStats {
  id: string;
  provider: string;
  model: string;
  circuit: BreakerState;
  /** Of the last calls counted (up to `SAMPLE`): share that succeeded, null before any. */
  success_rate: number | null;
  calls: number;
  failures: number;
  /** Time to the first byte of the answer (chat) or to the provider's acceptance (video), over the last calls. */
  latency_ms: { p50: number | null; p99: number | null };
  in_flight: number;
  /** Unix ms until which the provider asked us to wait, when it did. */
  retry_after_until: number | null;
}

/** How many recent outcomes and latencies each deployment keeps for its figures. */
const SAMPLE = 1_000;
/** A provider's Retry-After is honoured up to this long; beyond it, the breaker's cool-down takes over. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

class Ring {
  readonly values = new Float64Array(SAMPLE);
  size = 0;
  #next = 0;
  push(value: number) {
    this.values[this.#next] = value;
    this.#next = (this.#next + 1) % SAMPLE;
    if (this.size < SAMPLE) this.size++;
  }
}

class Deployment<T> {
  readonly breaker: CircuitBreaker;
  inFlight = 0;
  retryUntil = 0;
  minute = -1;
  startedThisMinute = 0;
  calls = 0;
  failures = 0;
  readonly outcomes = new Ring();
  readonly latencies = new Ring();
  constructor(
    readonly spec: DeploymentSpec<T>,
    breaker: BreakerOptions,
  ) {
    this.breaker = new CircuitBreaker(breaker);
  }
}

/** A call's hold on one deployment: reports how the call went, exactly once. */
export interface Lease<T> {
  readonly id: string;
  readonly spec: DeploymentSpec<T>;
  /** The call worked; `latencyMs` to its first byte. */
  succeeded(latencyMs: number): void;
  /** The call failed; a `ProviderError`'s kind decides whether the deployment is blamed. */
  failed(error: unknown): void;
  /** The caller went away: the call says nothing about the deployment. */
  abandoned(): void;
}

export type Acquired<T> = { lease: Lease<T> } | { lease: null; retryAt: number | null };

/**
 * The deployments of one public model, with a breaker, caps and figures each. `acquire` picks the next one
 * to try: a weighted random choice among those that may take a call now (breaker closed or offering its trial,
 * under their caps, not asked to wait), weight-0 ones in catalog order only when no weighted one may.
 * Everything is in this process's memory: each replica routes on what it has seen itself.
 */
export class DeploymentPool<T> {
  readonly #deployments: Deployment<T>[];

  constructor(
    specs: Array<DeploymentSpec<T>>,
    private readonly deps: { now: () => number; random: () => number; breaker?: BreakerOptions },
  ) {
    this.#deployments = specs.map((spec) => new Deployment(spec, deps.breaker ?? DEFAULT_BREAKER));
  }

  get specs(): Array<DeploymentSpec<T>> {
    return this.#deployments.map((d) => d.spec);
  }

  /**
   * The next deployment among those `eligible` and not `tried`; or none, with the soonest time one of them
   * could take a call (null when none ever could: all tried, or none eligible).
   */
  acquire(eligible: (spec: DeploymentSpec<T>) => boolean, tried: ReadonlySet<string>): Acquired<T> {
    const now = this.deps.now();
    let total = 0;
    const weighted: Deployment<T>[] = [];
    const fallbacks: Deployment<T>[] = [];
    let retryAt: number | null = null;
    for (const d of this.#deployments) {
      if (tried.has(d.spec.id) || !eligible(d.spec)) continue;
      const free = this.#freeAt(d, now);
      if (free > now) {
        retryAt = retryAt === null ? free : Math.min(retryAt, free);
        continue;
      }
      if (d.spec.weight > 0) {
        weighted.push(d);
        total += d.spec.weight;
      } else fallbacks.push(d);
    }
    // A half-open breaker's single trial is taken only by the deployment actually chosen.
    while (weighted.length > 0) {
      let pick = this.deps.random() * total;
      let index = weighted.findIndex((d) => (pick -= d.spec.weight) < 0);
      if (index < 0) index = weighted.length - 1;
      const chosen = weighted[index]!;
      if (chosen.breaker.tryAcquire(now)) return { lease: this.#lease(chosen, now) };
      weighted.splice(index, 1);
      total -= chosen.spec.weight;
    }
    for (const d of fallbacks) if (d.breaker.tryAcquire(now)) return { lease: this.#lease(d, now) };
    return { lease: null, retryAt };
  }

  stats(): DeploymentStats[] {
    const now = this.deps.now();
    return this.#deployments.map((d) => {
      let ok = 0;
      for (let i = 0; i < d.outcomes.size; i++) ok += d.outcomes.values[i]!;
      const sorted = Array.from(d.latencies.values.subarray(0, d.latencies.size)).sort((a, b) => a - b);
      const at = (q: number) => (sorted.length === 0 ? null : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 10) / 10);
      return {
        id: d.spec.id,
        provider: d.spec.provider,
        model: d.spec.model,
        circuit: d.breaker.state(now),
        success_rate: d.outcomes.size === 0 ? null : ok / d.outcomes.size,
        calls: d.calls,
        failures: d.failures,
        latency_ms: { p50: at(0.5), p99: at(0.99) },
        in_flight: d.inFlight,
        retry_after_until: d.retryUntil > now ? d.retryUntil : null,
      };
    });
  }

  /** When `d` may next take a call: now, or the soonest of its breaker's trial, its Retry-After and its caps. */
  #freeAt(d: Deployment<T>, now: number): number {
    let at = now;
    if (d.breaker.state(now) === 'open') at = Math.max(at, d.breaker.reopensAt());
    if (d.retryUntil > now) at = Math.max(at, d.retryUntil);
    const minute = Math.floor(now / 60_000);
    if (d.spec.rpm !== undefined && d.minute === minute && d.startedThisMinute >= d.spec.rpm) at = Math.max(at, (minute + 1) * 60_000);
    // A full deployment frees a slot when some call ends: soon, but when is unknown.
    if (d.spec.maxConcurrency !== undefined && d.inFlight >= d.spec.maxConcurrency) at = Math.max(at, now + 1_000);
    return at;
  }

  #lease(d: Deployment<T>, now: number): Lease<T> {
    const minute = Math.floor(now / 60_000);
    if (d.minute !== minute) {
      d.minute = minute;
      d.startedThisMinute = 0;
    }
    d.startedThisMinute++;
    d.inFlight++;
    let open = true;
    const end = () => {
      if (!open) return false;
      open = false;
      d.inFlight--;
      return true;
    };
    const { now: clock } = this.deps;
    return {
      id: d.spec.id,
      spec: d.spec,
      succeeded(latencyMs) {
        if (!end()) return;
        d.calls++;
        d.outcomes.push(1);
        d.latencies.push(latencyMs);
        d.breaker.success(clock());
      },
      failed(error) {
        if (!end()) return;
        // The provider refused this request on its merits: the deployment itself works.
        if (error instanceof ProviderError && error.kind === 'request') {
          d.calls++;
          d.outcomes.push(1);
          d.breaker.success(clock());
          return;
        }
        d.calls++;
        d.failures++;
        d.outcomes.push(0);
        const at = clock();
        if (error instanceof ProviderError && error.retryAfterMs !== undefined) {
          d.retryUntil = Math.max(d.retryUntil, at + Math.min(error.retryAfterMs, MAX_RETRY_AFTER_MS));
        }
        d.breaker.failure(at);
      },
      abandoned() {
        if (end()) d.breaker.abandon();
      },
    };
  }
}

/** A pool's figures in the admin API's shape. */
export function deploymentStatuses(model: string, stats: DeploymentStats[]): DeploymentStatus[] {
  return stats.map((s) => ({
    object: 'deployment',
    model,
    id: s.id,
    provider: s.provider,
    upstream_model: s.model,
    circuit: s.circuit,
    success_rate: s.success_rate,
    calls: s.calls,
    failures: s.failures,
    latency_ms: s.latency_ms,
    in_flight: s.in_flight,
    retry_after_until: s.retry_after_until === null ? null : Math.ceil(s.retry_after_until / 1000),
  }));
}
