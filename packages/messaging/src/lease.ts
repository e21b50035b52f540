import { performance } from 'node:perf_hooks';
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, natsNames, randomId, type Replicas } from '@oc/contracts';
import { ensureStream } from './streams';

/** Who holds a lease: a replica's name, and which run of it (a replica started again under its name is another run). */
export interface LeaseHolder {
  replica: string;
  run: string;
}

/** A lease as stored: its holder (`null` once released) and the revision a compare-and-set names. */
export interface LeaseRecord {
  holder: LeaseHolder | null;
  revision: number;
}

/** Where leases are kept: one record per key, written only over the revision the writer last read. */
export interface LeaseStore {
  read(key: string): Promise<LeaseRecord | undefined>;
  /** Writes `holder` if the key is still at `revision` (0: never written): the new revision, or `undefined` if it was not. */
  write(key: string, holder: LeaseHolder | null, revision: number): Promise<number | undefined>;
}

/**
 * Leases on a JetStream stream of their own (`<PREFIX>_LEASES`, the last message per key kept): a write is a
 * publish expecting the key's last sequence, which is what the KV API does underneath. `timeoutMs` bounds
 * each read and write, so that a holder cut off from NATS hears it well within its lease; on a cluster,
 * `replicas` servers keep the stream (`NATS_STREAM_REPLICAS`).
 */
export async function jetStreamLeaseStore(
  nc: NatsConnection,
  options: { prefix?: string; timeoutMs?: number; replicas?: number } = {},
): Promise<LeaseStore> {
  const names = natsNames(options.prefix);
  const timeout = options.timeoutMs ?? 1_000;
  const jsm = await jetstreamManager(nc, { timeout });
  const config = { subjects: [names.lease('>')], storage: StorageType.File, max_msgs_per_subject: 1, num_replicas: options.replicas ?? 1 };
  await ensureStream(jsm, names.leasesStream, config);
  const js = jsm.jetstream();
  return {
    async read(key) {
      const message = await jsm.streams.getMessage(names.leasesStream, { last_by_subj: names.lease(key) });
      return message ? { holder: message.json<LeaseHolder | null>(), revision: message.seq } : undefined;
    },
    async write(key, holder, revision) {
      try {
        const ack = await js.publish(names.lease(key), JSON.stringify(holder), { expect: { lastSubjectSequence: revision }, timeout });
        return ack.seq;
      } catch (error) {
        if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence) return undefined;
        throw error;
      }
    },
  };
}

/** Timers as the lease uses them, injected so that tests move time themselves. */
export interface LeaseTimers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const systemTimers: LeaseTimers = {
  set: (callback, ms) => setTimeout(callback, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
/** Elapsed time, which a wall clock set back or forward does not disturb. */
const monotonicClock: Clock = { now: () => performance.now() };

export interface LeasedWorkOptions {
  leases: LeaseStore;
  key: string;
  /** This replica's name, and whether the holder's replica is gone (presence), to take over without waiting. */
  replicas: Pick<Replicas, 'self' | 'isGone'>;
  /** Starts the work when the lease is taken; what it returns stops it when the lease is lost. */
  start: () => Promise<{ stop(): Promise<void> }>;
  /** How long a lease not renewed lasts, as a contender measures it from when it first saw that revision. */
  leaseMs?: number;
  /** How often the holder renews, and a contender looks. */
  renewMs?: number;
  /**
   * The holder stops this long before its lease could end on a contender's side: time for the work in flight
   * to stop, and for clocks that run at slightly different rates.
   */
  marginMs?: number;
  clock?: Clock;
  timers?: LeaseTimers;
  /** Told when this replica takes the lease (true) or gives it up (false). */
  onHeld?: (held: boolean) => void;
  onError?: (error: unknown) => void;
}

/**
 * Runs `start`'s work on one replica at a time: the one holding the lease `key`. The holder renews every
 * `renewMs` with a compare-and-set on the revision it wrote last; a contender takes the lease over by a
 * compare-and-set on the revision it read, once that revision has not changed for `leaseMs` (measured on its
 * own clock from when it first saw it, so clocks set differently do not matter), or at once when the record
 * names nobody (released), a replica that presence says is gone, or an earlier run under this replica's name.
 * The holder stops the work when a renewal finds another holder, and, renewals failing (NATS out of reach),
 * once `leaseMs - marginMs` have passed since it sent its last successful renewal: that is before any
 * contender's `leaseMs` since it saw that renewal has. Stopping releases the lease, for another to take at once.
 */
export function runLeased(options: LeasedWorkOptions): { stop(): Promise<void> } {
  const { leases, key, replicas } = options;
  const leaseMs = options.leaseMs ?? 5_000;
  const renewMs = options.renewMs ?? 1_000;
  const marginMs = options.marginMs ?? 1_000;
  const clock = options.clock ?? monotonicClock;
  const timers = options.timers ?? systemTimers;
  const onError = options.onError ?? (() => {});
  const me: LeaseHolder = { replica: replicas.self, run: randomId() };

  type Held = { revision: number; fence: unknown; work: Promise<{ stop(): Promise<void> }> };
  let held: Held | undefined;
  /** Another's revision and when this replica first saw it. */
  let seen: { revision: number; since: number } | undefined;
  let stopped = false;
  let next: unknown;
  let ticking: Promise<void> = Promise.resolve();

  // Fencing by time: armed from the moment a write was sent, so it fires before any contender's wait ends.
  const fenceFrom = (sentAt: number) => timers.set(() => void lose(), Math.max(0, sentAt + leaseMs - marginMs - clock.now()));
  const lose = async () => {
    const was = held;
    if (!was) return;
    held = undefined;
    timers.clear(was.fence);
    options.onHeld?.(false);
    await was.work.then((work) => work.stop(), () => undefined);
  };
  const mayTake = async (record: LeaseRecord) => {
    const { holder } = record;
    if (holder === null || holder.run === me.run || holder.replica === me.replica) return true;
    if (seen?.revision !== record.revision) seen = { revision: record.revision, since: clock.now() };
    else if (clock.now() - seen.since >= leaseMs) return true;
    return replicas.isGone(holder.replica);
  };
  const take = async () => {
    const record = await leases.read(key);
    if (record && !(await mayTake(record))) return;
    const sentAt = clock.now();
    const revision = await leases.write(key, me, record?.revision ?? 0);
    if (revision === undefined) return;
    if (stopped) return void (await leases.write(key, null, revision));
    seen = undefined;
    const lease: Held = { revision, fence: fenceFrom(sentAt), work: options.start() };
    held = lease;
    options.onHeld?.(true);
    // Work that failed to start is not done under a lease held: given up, and started again at the next look.
    lease.work.catch((error: unknown) => {
      onError(error);
      if (held !== lease) return;
      held = undefined;
      timers.clear(lease.fence);
      options.onHeld?.(false);
    });
  };
  const renew = async (lease: Held) => {
    const sentAt = clock.now();
    let revision = await leases.write(key, me, lease.revision);
    // A renewal that timed out may still have been written: then the record is this run's, a revision later.
    if (revision === undefined) {
      const record = await leases.read(key);
      if (record?.holder?.run === me.run) revision = record.revision;
    }
    if (held !== lease) return;
    if (revision === undefined) return lose();
    lease.revision = revision;
    timers.clear(lease.fence);
    lease.fence = fenceFrom(sentAt);
  };
  const tick = async () => {
    try {
      if (held) await renew(held);
      else await take();
    } catch (error) {
      onError(error);
    }
    if (!stopped) next = timers.set(() => void (ticking = tick()), renewMs);
  };
  ticking = tick();

  return {
    async stop() {
      stopped = true;
      timers.clear(next);
      await ticking;
      const lease = held;
      await lose();
      if (lease) await leases.write(key, null, lease.revision).catch(onError);
    },
  };
}
