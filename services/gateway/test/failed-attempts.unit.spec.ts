import { ApiError } from '@oc/contracts';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FailedAttempts } from '../src/application/failed-attempts';
import { RateLimits } from '../src/application/rate-limits';
import { LOCKOUT, type LimitWindow } from '../src/domain/limits';

/** The seconds a refusal asks to wait, or null when the subject may try. */
async function waitAsked(attempts: FailedAttempts, windows: LimitWindow[]): Promise<number | null> {
  try {
    await attempts.check(windows, 'failed attempts');
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).toBody().error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    return (error as ApiError).retryAfter!;
  }
}

describe('FailedAttempts', () => {
  // The in-memory counters read Date.now() and expire on timers: the test moves both, nothing waits.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    vi.setSystemTime(Date.UTC(2026, 10, 27, 12));
  });
  afterEach(() => vi.useRealTimers());

  const window = (subject: string): LimitWindow => ({ name: 'test_failures', subject, points: 3, durationSeconds: 60 });
  const fail = async (attempts: FailedAttempts, windows: LimitWindow[], times: number) => {
    for (let i = 0; i < times; i++) await attempts.failed(windows, 'failed attempts');
  };

  it('locks a subject out once it fills its window, each time it does so again for twice as long, up to a day', async () => {
    const attempts = new FailedAttempts(RateLimits.inMemory());
    const guesser = [window('203.0.113.7')];
    await fail(attempts, guesser, 2);
    expect(await waitAsked(attempts, guesser)).toBeNull();
    await fail(attempts, guesser, 1);

    const waits: number[] = [];
    for (let lockout = 0; lockout < 12; lockout++) {
      const wait = (await waitAsked(attempts, guesser))!;
      waits.push(wait);
      vi.advanceTimersByTime(wait * 1000 - 1000);
      expect(await waitAsked(attempts, guesser), `still locked out 1 s before the end of lockout ${lockout + 1}`).not.toBeNull();
      vi.advanceTimersByTime(1000);
      expect(await waitAsked(attempts, guesser)).toBeNull();
      await fail(attempts, guesser, 3);
    }
    expect(waits).toEqual([60, 120, 240, 480, 960, 1920, 3840, 7680, 15_360, 30_720, 61_440, LOCKOUT.maxSeconds]);
  });

  it('keeps each subject apart: another address is never held up by a locked-out one', async () => {
    const attempts = new FailedAttempts(RateLimits.inMemory());
    await fail(attempts, [window('203.0.113.7')], 3);
    expect(await waitAsked(attempts, [window('203.0.113.7')])).toBe(60);
    expect(await waitAsked(attempts, [window('198.51.100.1')])).toBeNull();
  });

  it('answers a failure counted beyond the window 429 (guesses checked alongside others before they were counted)', async () => {
    const attempts = new FailedAttempts(RateLimits.inMemory());
    const guesser = [window('203.0.113.9')];
    await fail(attempts, guesser, 3);
    await expect(attempts.failed(guesser, 'failed attempts')).rejects.toMatchObject({ status: 429, retryAfter: 60 });
  });

  it('forgets lockouts a week after the first', async () => {
    const attempts = new FailedAttempts(RateLimits.inMemory());
    const guesser = [window('203.0.113.10')];
    await fail(attempts, guesser, 3);
    vi.advanceTimersByTime(60_000);
    await fail(attempts, guesser, 3);
    expect(await waitAsked(attempts, guesser)).toBe(120);
    vi.advanceTimersByTime(LOCKOUT.memorySeconds * 1000);
    await fail(attempts, guesser, 3);
    expect(await waitAsked(attempts, guesser)).toBe(60);
  });
});
