import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import type { LimitWindow } from '../domain/limits';

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix seconds at which the window resets. */
  reset: number;
}

export type RateLimitOutcome =
  | { allowed: true; headers: RateLimitState }
  | { allowed: false; headers: RateLimitState; retryAfterSeconds: number; window: string };

/** What every key the gateway writes in Redis begins with, unless REDIS_KEY_PREFIX says otherwise. */
export const DEFAULT_REDIS_KEY_PREFIX = 'oc_rl:';

/**
 * Counts requests in every applicable window and reports the tightest one, as the spec's
 * X-RateLimit-* headers need. Counters live in memory, or in Redis when gateways share them.
 */
export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();

  constructor(
    private readonly create: (window: LimitWindow) => RateLimiterAbstract,
    private readonly now: () => number = Date.now,
  ) {}

  static inMemory() {
    return new RateLimits((w) => new RateLimiterMemory({ keyPrefix: prefix(w), points: w.points, duration: w.durationSeconds }));
  }

  /**
   * Redis-backed counters, each key beginning with `keyPrefix`; if Redis is unreachable each gateway falls back to
   * its own memory counters.
   */
  static redis(client: Redis, keyPrefix = DEFAULT_REDIS_KEY_PREFIX) {
    return new RateLimits(
      (w) =>
        new RateLimiterRedis({
          storeClient: client,
          keyPrefix: `${keyPrefix}${prefix(w)}`,
          points: w.points,
          duration: w.durationSeconds,
          insuranceLimiter: new RateLimiterMemory({ keyPrefix: prefix(w), points: w.points, duration: w.durationSeconds }),
        }),
    );
  }

  private limiter(window: LimitWindow): RateLimiterAbstract {
    const key = prefix(window);
    let limiter = this.limiters.get(key);
    if (!limiter) {
      limiter = this.create(window);
      this.limiters.set(key, limiter);
    }
    return limiter;
  }

  /** Spends `cost` points in every window; refused when any window has no room left. */
  async consume(windows: LimitWindow[], cost = 1): Promise<RateLimitOutcome> {
    const results = await Promise.all(
      windows.map(async (window) => {
        try {
          return { window, res: await this.limiter(window).consume(window.subject, cost), ok: true };
        } catch (rejection) {
          if (rejection instanceof RateLimiterRes) return { window, res: rejection, ok: false };
          throw rejection;
        }
      }),
    );
    const refused = results.filter((r) => !r.ok).sort((a, b) => b.res.msBeforeNext - a.res.msBeforeNext)[0];
    if (refused) {
      return {
        allowed: false,
        headers: this.state(refused.window, refused.res),
        retryAfterSeconds: Math.max(1, Math.ceil(refused.res.msBeforeNext / 1000)),
        window: refused.window.name,
      };
    }
    const tightest = results.sort((a, b) => a.res.remainingPoints - b.res.remainingPoints)[0]!;
    return { allowed: true, headers: this.state(tightest.window, tightest.res) };
  }

  /** Whether a window still has room, without spending anything (chat tokens before a call). */
  async peek(window: LimitWindow): Promise<RateLimitOutcome> {
    const res = await this.limiter(window).get(window.subject);
    if (!res || res.consumedPoints < window.points) {
      const state = res
        ? this.state(window, res)
        : { limit: window.points, remaining: window.points, reset: this.resetAt(window.durationSeconds * 1000) };
      return { allowed: true, headers: state };
    }
    return {
      allowed: false,
      headers: this.state(window, res),
      retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
      window: window.name,
    };
  }

  /** Records spend that is only known afterwards (tokens used); never refuses. */
  async record(window: LimitWindow, points: number): Promise<void> {
    if (points <= 0) return;
    await this.limiter(window).penalty(window.subject, points);
  }

  /** Adds one to the subject's count in the window, never refusing; the count after it. */
  async increment(window: LimitWindow): Promise<number> {
    return (await this.limiter(window).penalty(window.subject, 1)).consumedPoints;
  }

  /** Refuses the window's subject for `seconds` from now, however much of the window was left (a lockout). */
  async block(window: LimitWindow, seconds: number): Promise<void> {
    await this.limiter(window).block(window.subject, seconds);
  }

  private state(window: LimitWindow, res: RateLimiterRes): RateLimitState {
    return {
      limit: window.points,
      remaining: Math.max(0, window.points - res.consumedPoints),
      reset: this.resetAt(res.msBeforeNext),
    };
  }

  private resetAt(msFromNow: number) {
    return Math.ceil((this.now() + Math.max(0, msFromNow)) / 1000);
  }
}

const prefix = (w: LimitWindow) => `${w.name}_${w.points}_${w.durationSeconds}`;

/**
 * Waits, a bounded time, for the Redis connection to be ready. Commands sent before it fail at once (no
 * offline queue) and count in this gateway's own memory instead, so a gateway that answered before Redis was
 * ready would let each gateway's first requests through on its own count. Whether Redis was ready in time.
 */
export async function redisReady(redis: Redis, timeoutMs = 5_000): Promise<boolean> {
  if (redis.status === 'ready') return true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => redis.once('ready', () => resolve(true))),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  return ready;
}
