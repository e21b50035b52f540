import { rateLimited } from '@oc/contracts';
import { type LimitWindow, lockoutSeconds, lockoutsWindow } from '../domain/limits';
import type { RateLimits } from './rate-limits';

/**
 * Failed authentications (a wrong admin token, a wrong password), counted in windows per subject (a client
 * address; an email at an address) in the same counters as the API's limits, so every gateway sees them. A
 * subject that fills a window is locked out for a time that doubles each time it does so again (`lockoutSeconds`).
 */
export class FailedAttempts {
  constructor(private readonly limits: RateLimits) {}

  /**
   * 429 while any of the windows is spent, checked before the credential is: a guess made then costs nothing
   * and is told nothing, right or wrong.
   */
  async check(windows: LimitWindow[], what: string): Promise<void> {
    for (const window of windows) {
      const state = await this.limits.peek(window);
      if (!state.allowed) throw rateLimited(state.retryAfterSeconds, what);
    }
  }

  /**
   * Counts one failure in every window. The failure that takes a window's last point locks its subject out;
   * one beyond it (a guess made alongside others, checked before they were counted) is answered 429 too.
   */
  async failed(windows: LimitWindow[], what: string): Promise<void> {
    const outcomes = await Promise.all(
      windows.map(async (window) => {
        const outcome = await this.limits.consume([window]);
        if (outcome.allowed && outcome.headers.remaining === 0) await this.lockOut(window);
        return outcome;
      }),
    );
    const waits = outcomes.flatMap((outcome) => (outcome.allowed ? [] : [outcome.retryAfterSeconds]));
    if (waits.length > 0) throw rateLimited(Math.max(...waits), what);
  }

  private async lockOut(window: LimitWindow): Promise<void> {
    const lockouts = await this.limits.increment(lockoutsWindow(window));
    await this.limits.block(window, lockoutSeconds(window, lockouts));
  }
}
