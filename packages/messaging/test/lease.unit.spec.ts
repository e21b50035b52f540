import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type LeaseHolder, type LeaseStore, runLeased } from '../src';

/** Time that moves only when the test says so: the lease's clock and timers. */
function manualTime() {
  let now = 0;
  let ids = 0;
  const pending = new Map<number, { at: number; callback: () => void }>();
  const settle = async () => {
    for (let i = 0; i < 20; i++) await turn();
  };
  return {
    clock: { now: () => now },
    timers: {
      set: (callback: () => void, ms: number) => {
        pending.set(++ids, { at: now + ms, callback });
        return ids;
      },
      clear: (id: unknown) => void pending.delete(id as number),
    },
    now: () => now,
    /** Runs every timer due within `ms`, in order, letting the work they start settle in between. */
    async advance(ms: number) {
      const end = now + ms;
      for (;;) {
        await settle();
        const due = [...pending].filter(([, timer]) => timer.at <= end).sort(([, a], [, b]) => a.at - b.at)[0];
        if (!due) break;
        pending.delete(due[0]);
        now = due[1].at;
        due[1].callback();
      }
      now = end;
      await settle();
    },
  };
}

/** One key-value record with compare-and-set; each replica reaches it through a connection of its own, which `cut` leaves unanswered. */
function memoryLeases() {
  let record: { holder: LeaseHolder | null; revision: number } | undefined;
  let revisions = 0;
  const unanswered = new Promise<never>(() => {});
  return {
    holder: () => record?.holder?.replica,
    connect() {
      let cut = false;
      const store: LeaseStore = {
        read: async () => (cut ? unanswered : record && { ...record }),
        write: async (_key, holder, revision) => {
          if (cut) return unanswered;
          if ((record?.revision ?? 0) !== revision) return undefined;
          record = { holder, revision: ++revisions };
          return record.revision;
        },
      };
      return { store, cut: () => void (cut = true) };
    },
  };
}

const LEASE = { leaseMs: 5_000, renewMs: 1_000, marginMs: 1_000 };

function replicasOn(leases: ReturnType<typeof memoryLeases>, time: ReturnType<typeof manualTime>, gone: Set<string> = new Set()) {
  const timeline: string[] = [];
  const running = new Set<string>();
  const replica = (self: string) => {
    const connection = leases.connect();
    const lease = runLeased({
      ...LEASE,
      leases: connection.store,
      key: 'relay.video',
      replicas: { self, isGone: async (name) => gone.has(name) },
      clock: time.clock,
      timers: time.timers,
      start: async () => {
        running.add(self);
        timeline.push(`${time.now()} ${self} started`);
        return {
          stop: async () => {
            running.delete(self);
            timeline.push(`${time.now()} ${self} stopped`);
          },
        };
      },
    });
    return { stop: () => lease.stop(), cut: connection.cut };
  };
  return { timeline, running, replica };
}

describe('runLeased', () => {
  it('runs the work on one replica only while both keep running', async () => {
    const time = manualTime();
    const leases = memoryLeases();
    const { timeline, running, replica } = replicasOn(leases, time);
    replica('video-1');
    replica('video-2');
    await time.advance(60_000);
    expect(timeline).toEqual(['0 video-1 started']);
    expect([...running]).toEqual(['video-1']);
  });

  it('stops the work of a holder cut off from the store before the other replica starts it, and no later than its lease', async () => {
    const time = manualTime();
    const leases = memoryLeases();
    const { timeline, running, replica } = replicasOn(leases, time);
    const holder = replica('video-1');
    replica('video-2');
    await time.advance(2_500);
    // Its last renewal was sent at 2,000 ms; every call from now on goes unanswered, as across a partition.
    holder.cut();
    await time.advance(20_000);
    expect([...running]).toEqual(['video-2']);
    expect(leases.holder()).toBe('video-2');
    // video-1 stops at 2,000 + 5,000 - 1,000; video-2, having seen that renewal at 2,000, waits 5,000 at least.
    expect(timeline).toEqual(['0 video-1 started', '6000 video-1 stopped', '7000 video-2 started']);
  });

  it('hands the work over within one look once presence says the holder is gone', async () => {
    const time = manualTime();
    const leases = memoryLeases();
    const gone = new Set<string>();
    const { timeline, replica } = replicasOn(leases, time, gone);
    const holder = replica('video-1');
    replica('video-2');
    await time.advance(2_500);
    // Killed: it neither renews nor answers presence.
    holder.cut();
    gone.add('video-1');
    await time.advance(1_000);
    expect(timeline).toEqual(['0 video-1 started', '3000 video-2 started']);
  });

  it('gives the lease up on stop, for the other replica to take at its next look', async () => {
    const time = manualTime();
    const leases = memoryLeases();
    const { timeline, replica } = replicasOn(leases, time);
    const first = replica('video-1');
    replica('video-2');
    await time.advance(2_500);
    await first.stop();
    expect(leases.holder()).toBeUndefined();
    await time.advance(1_000);
    expect(timeline).toEqual(['0 video-1 started', '2500 video-1 stopped', '3000 video-2 started']);
  });

  it('takes at once a lease its own replica name held in an earlier run', async () => {
    const time = manualTime();
    const leases = memoryLeases();
    const { timeline, replica } = replicasOn(leases, time);
    const earlier = replica('video-2');
    replica('video-1');
    await time.advance(2_500);
    // Killed and started again under its name: to presence its name is there (the new run answers), yet the
    // new run need not wait for the earlier run's lease to run out.
    earlier.cut();
    replica('video-2');
    await time.advance(0);
    expect(timeline).toEqual(['0 video-2 started', '2500 video-2 started']);
  });
});
