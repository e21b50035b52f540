import { ManualClock } from '@oc/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { ClockScheduler } from '../src/adapters/scheduler';

const T0 = Date.UTC(2026, 10, 22, 12);

/** A promise the test resolves by hand, so that a task can be held running. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('ClockScheduler', () => {
  let scheduler: ClockScheduler | undefined;
  afterEach(async () => {
    await scheduler?.close();
    scheduler = undefined;
  });
  /** The tick is an hour of real time: whatever runs in these tests was started without it. */
  const start = (clock: ManualClock) => (scheduler = new ClockScheduler(clock, () => undefined, 3_600_000));

  it('starts a task that is due when it is scheduled at once, without waiting for a tick', async () => {
    const clock = new ManualClock(T0);
    const s = start(clock);
    const ran = deferred();
    s.schedule('video_1', clock.now(), async () => ran.resolve());
    await ran.promise;
  });

  it('leaves a task due later until the clock has reached it', async () => {
    const clock = new ManualClock(T0);
    const s = start(clock);
    const runs: number[] = [];
    s.schedule('video_1', T0 + 1_000, async () => void runs.push(clock.now()));
    await s.runDue();
    expect(runs).toEqual([]);
    clock.advance(999);
    await s.runDue();
    expect(runs).toEqual([]);
    clock.advance(1);
    await s.runDue();
    expect(runs).toEqual([T0 + 1_000]);
  });

  it('runs one task per key at a time, and the follow-up a task schedules for now right after it', async () => {
    const clock = new ManualClock(T0);
    const s = start(clock);
    const hold = deferred();
    const followUp = deferred();
    const order: string[] = [];
    s.schedule('video_1', T0, async () => {
      order.push('first');
      s.schedule('video_1', clock.now(), async () => {
        order.push('follow-up');
        followUp.resolve();
      });
      await hold.promise;
      order.push('first done');
    });
    s.schedule('video_2', T0, async () => void order.push('other key'));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['first', 'other key']);
    hold.resolve();
    await followUp.promise;
    expect(order).toEqual(['first', 'other key', 'first done', 'follow-up']);
  });

  it('keeps only the latest schedule of a key, and forgets a cancelled one', async () => {
    const clock = new ManualClock(T0);
    const s = start(clock);
    const runs: string[] = [];
    s.schedule('video_1', T0 + 5_000, async () => void runs.push('replaced'));
    s.schedule('video_1', T0 + 1_000, async () => void runs.push('latest'));
    s.schedule('video_2', T0 + 1_000, async () => void runs.push('cancelled'));
    s.cancel('video_2');
    clock.advance(10_000);
    await s.runDue();
    await s.runDue();
    expect(runs).toEqual(['latest']);
  });
});
