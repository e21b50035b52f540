/**
 * A circuit breaker for one deployment, on the injected clock.
 *
 *   closed ──(consecutive failures ≥ N, or error rate ≥ R over ≥ M calls in the window)──▶ open
 *   open ──(cool-down elapsed)──▶ half_open: one trial call at a time
 *   half_open ──(trial succeeds)──▶ closed        half_open ──(trial fails)──▶ open (cool-down doubled, capped)
 *
 * While open, the router skips the deployment: a request fails over at once instead of waiting for a
 * timeout, and the deployment gets one trial after its cool-down rather than the whole traffic.
 */
export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  consecutiveFailures: number;
  /** Error rate (0..1) over the window that opens it, once the window holds `minimumCalls`. */
  errorRate: number;
  minimumCalls: number;
  windowMs: number;
  /** First cool-down; each failed trial doubles it, up to `maxCooldownMs`. */
  cooldownMs: number;
  maxCooldownMs: number;
}

export const DEFAULT_BREAKER: BreakerOptions = {
  consecutiveFailures: 5,
  errorRate: 0.5,
  minimumCalls: 20,
  windowMs: 60_000,
  cooldownMs: 15_000,
  maxCooldownMs: 300_000,
};

export class CircuitBreaker {
  #state: BreakerState = 'closed';
  #consecutive = 0;
  /** Calls of the current window and the one before it: the error rate is over both, so it never starts from nothing. */
  #window = { start: 0, calls: 0, failures: 0 };
  #previous = { calls: 0, failures: 0 };
  #openedAt = 0;
  #cooldown: number;
  #trialInFlight = false;

  constructor(private readonly options: BreakerOptions = DEFAULT_BREAKER) {
    this.#cooldown = options.cooldownMs;
  }

  state(now: number): BreakerState {
    if (this.#state === 'open' && now - this.#openedAt >= this.#cooldown) this.#state = 'half_open';
    return this.#state;
  }

  /** Whether a call may go now; in half-open, it takes the single trial slot. */
  tryAcquire(now: number): boolean {
    const state = this.state(now);
    if (state === 'closed') return true;
    if (state === 'open' || this.#trialInFlight) return false;
    this.#trialInFlight = true;
    return true;
  }

  /** When an open breaker lets a trial through (for a Retry-After when nothing else is left). */
  reopensAt(): number {
    return this.#openedAt + this.#cooldown;
  }

  success(now: number): void {
    this.#count(now, false);
    this.#consecutive = 0;
    if (this.#state !== 'closed') {
      this.#state = 'closed';
      this.#cooldown = this.options.cooldownMs;
      this.#window = { start: now, calls: 0, failures: 0 };
      this.#previous = { calls: 0, failures: 0 };
    }
    this.#trialInFlight = false;
  }

  failure(now: number): void {
    this.#count(now, true);
    this.#consecutive++;
    if (this.#state === 'half_open') {
      this.#cooldown = Math.min(this.#cooldown * 2, this.options.maxCooldownMs);
      this.#open(now);
    } else if (this.#state === 'closed' && (this.#consecutive >= this.options.consecutiveFailures || this.#rateExceeded())) {
      this.#open(now);
    }
    this.#trialInFlight = false;
  }

  /** A call that ended without telling whether the deployment works (the client went away): frees the trial slot. */
  abandon(): void {
    this.#trialInFlight = false;
  }

  #open(now: number) {
    this.#state = 'open';
    this.#openedAt = now;
  }

  #count(now: number, failed: boolean) {
    const { windowMs } = this.options;
    if (now - this.#window.start >= windowMs) {
      this.#previous = now - this.#window.start >= 2 * windowMs ? { calls: 0, failures: 0 } : this.#window;
      this.#window = { start: now, calls: 0, failures: 0 };
    }
    this.#window.calls++;
    if (failed) this.#window.failures++;
  }

  #rateExceeded(): boolean {
    const calls = this.#window.calls + this.#previous.calls;
    const failures = this.#window.failures + this.#previous.failures;
    return calls >= this.options.minimumCalls && failures / calls >= this.options.errorRate;
  }
}
