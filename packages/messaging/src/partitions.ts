import type { NatsConnection } from '@nats-io/transport-node';
import { natsNames, Subjects } from '@oc/contracts';

/**
 * Organizations are spread over this many partitions, and each partition has one owner among a service's live
 * replicas. Fixed, so that a partition never changes with the number of replicas: only its owner does.
 */
export const ORGANIZATION_PARTITIONS = 64;

/**
 * Requests that decide on one organization's account stream (named by the payload's `org_id`): they are sent to
 * the replica owning the organization's partition, so that one replica decides on an account on its kept state
 * and two replicas do not race appends to it. Ownership is a matter of cost only: whichever replica answers,
 * the append is checked against the stream's revision.
 */
export const ORGANIZATION_SUBJECTS: ReadonlySet<string> = new Set([
  Subjects.billing.reserveFunds,
  Subjects.billing.captureReservation,
  Subjects.billing.releaseReservation,
  Subjects.billing.addCredits,
  Subjects.billing.updateOrganization,
]);

/** FNV-1a, then murmur3's finalizer: nearby strings (`billing-1#3`, `billing-2#3`) get unrelated values. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export const organizationPartition = (orgId: string): number => hash32(orgId) % ORGANIZATION_PARTITIONS;

/** Where a request on a partitioned subject goes first: `partitions.<p>.<subject>`, heard by the partition's owner. */
export const partitionSubject = (partition: number, subject: string): string => `partitions.${partition}.${subject}`;

/** The partition an organization's request belongs to, when the subject is partitioned and the payload names one. */
export function requestPartition(subject: string, payload: unknown): number | undefined {
  if (!ORGANIZATION_SUBJECTS.has(subject) || payload === null || typeof payload !== 'object') return undefined;
  const orgId = (payload as { org_id?: unknown }).org_id;
  return typeof orgId === 'string' ? organizationPartition(orgId) : undefined;
}

/**
 * The owner of `partition` among `members` by rendezvous hashing (the highest `hash32(member#partition)`): every
 * replica that sees the same members names the same owner, and a member joining or leaving moves only the
 * partitions it gains or had, about 1/n of them.
 */
export function partitionOwner(partition: number, members: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const member of members) {
    const weight = hash32(`${member}#${partition}`);
    if (weight > bestWeight || (weight === bestWeight && best !== undefined && member < best)) {
      best = member;
      bestWeight = weight;
    }
  }
  return best;
}

export function ownedPartitions(self: string, members: Iterable<string>): Set<number> {
  const all = new Set([...members, self]);
  const owned = new Set<number>();
  for (let p = 0; p < ORGANIZATION_PARTITIONS; p++) if (partitionOwner(p, all) === self) owned.add(p);
  return owned;
}

/** A replica's say on the members subject: here, or leaving (stopping, so its partitions are taken at once). */
interface MemberNotice {
  replica: string;
  leaving?: boolean;
}

export interface PartitionMembershipOptions {
  service: string;
  self: string;
  prefix?: string;
  /** How often each replica says it is here. */
  heartbeatMs?: number;
  /** A replica not heard from for this long is no longer counted (it was killed, or is cut off). */
  expireMs?: number;
  /** Told the partitions this replica owns, first once the members are known, then at every change. */
  onChange(owned: ReadonlySet<number>): void;
}

/**
 * Which partitions this replica owns, from the members it hears on `<prefix>.members.<service>` (core NATS, no
 * state kept anywhere): each replica says it is here every `heartbeatMs`, and at once when it hears a name it did
 * not know (a replica starting learns the others within a round trip); a stopping one says it leaves. Replicas
 * that see different members for a moment (one starting, or killed and not yet expired) may both own a partition,
 * or neither: callers then reach a replica through the service's plain subject, and the append's expected
 * revision keeps every account exact either way.
 */
export async function partitionMembership(nc: NatsConnection, options: PartitionMembershipOptions): Promise<{ stop(): Promise<void> }> {
  const subject = natsNames(options.prefix).subject(`members.${options.service}`);
  const heartbeatMs = options.heartbeatMs ?? 1_000;
  const expireMs = options.expireMs ?? 3_500;
  const seen = new Map<string, number>();
  let owned: Set<number> | undefined;
  let ready = false;
  const say = (notice: MemberNotice) => {
    try {
      nc.publish(subject, JSON.stringify(notice));
    } catch {
      // The connection is closed: this replica is going away, and the others will stop hearing it.
    }
  };
  const recompute = () => {
    if (!ready) return;
    const now = performance.now();
    for (const [member, at] of seen) if (now - at > expireMs) seen.delete(member);
    const next = ownedPartitions(options.self, seen.keys());
    const same = owned !== undefined && next.size === owned.size && [...next].every((p) => owned!.has(p));
    if (same) return;
    owned = next;
    options.onChange(next);
  };
  const subscription = nc.subscribe(subject, {
    callback: (error, message) => {
      if (error) return;
      let notice: MemberNotice;
      try {
        notice = message.json<MemberNotice>();
      } catch {
        return;
      }
      if (typeof notice?.replica !== 'string' || notice.replica === options.self) return;
      if (notice.leaving) seen.delete(notice.replica);
      else {
        const known = seen.has(notice.replica);
        seen.set(notice.replica, performance.now());
        if (!known) say({ replica: options.self });
      }
      recompute();
    },
  });
  await nc.flush();
  say({ replica: options.self });
  // The others answer a name they did not know at once: one round trip, and this replica claims only its share.
  await nc.flush();
  await new Promise((resolve) => setTimeout(resolve, Math.min(200, heartbeatMs)));
  ready = true;
  recompute();
  const timer = setInterval(() => {
    say({ replica: options.self });
    recompute();
  }, heartbeatMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      subscription.unsubscribe();
      say({ replica: options.self, leaving: true });
      await nc.flush().catch(() => undefined);
    },
  };
}
