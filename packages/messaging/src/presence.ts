import { type NatsConnection, RequestError } from '@nats-io/transport-node';
import { natsNames, randomId, type Replicas } from '@oc/contracts';

/** Another running process already answers for this replica's name. */
export class ReplicaNameInUseError extends Error {
  constructor(readonly service: string, readonly replica: string) {
    super(`Another running ${service} process already uses the replica name '${replica}'; give each replica its own REPLICA_ID`);
    this.name = 'ReplicaNameInUseError';
  }
}

export interface NatsPresence extends Replicas {
  /** What this process answers presence with: a replica started again under its name answers otherwise. */
  readonly incarnation: string;
  /** Stops answering: to the others, this replica is gone from now on. */
  stop(): Promise<void>;
}

/**
 * Replicas of a service over NATS: each answers on a subject of its own name (no queue group), and a replica
 * is gone when the server says nobody listens there ("no responders"). The server drops a connection's
 * subscriptions as soon as the connection closes, which a killed process's does at once, so a SIGKILLed
 * replica is known gone within a round trip and no lease or heartbeat has to expire first. An answer that
 * merely comes late (a busy replica, a NATS hiccup) is "not gone": taking over a live replica's work is
 * what must not happen lightly, while waiting for the next sweep costs only a few seconds. If it does happen
 * (a replica cut off from NATS while it still writes to the event store), the takeover is still one append
 * with the expected revision, so the replica that lost the work stops at its next append.
 */
export async function natsPresence(
  nc: NatsConnection,
  options: { service: string; self: string; prefix?: string; timeoutMs?: number },
): Promise<NatsPresence> {
  const { service, self } = options;
  const names = natsNames(options.prefix);
  const timeout = options.timeoutMs ?? 2_000;
  const answers = async (replica: string): Promise<boolean | 'unknown'> => {
    try {
      await nc.request(names.presence(service, replica), undefined, { timeout });
      return true;
    } catch (error) {
      return error instanceof RequestError && error.isNoResponders() ? false : 'unknown';
    }
  };
  if ((await answers(self)) === true) throw new ReplicaNameInUseError(service, self);
  const incarnation = randomId();
  const subscription = nc.subscribe(names.presence(service, self), { callback: (_error, msg) => void msg.respond(incarnation) });
  // The server has the interest before anyone is told this replica is up.
  await nc.flush();
  return {
    self,
    incarnation,
    shared: true,
    isGone: async (replica) => replica !== self && (await answers(replica)) === false,
    stop: async () => subscription.unsubscribe(),
  };
}

/** Processes doing a caller's work, watched by their presence so that the caller hears at once when one is gone. */
export interface ReplicaWatch {
  /**
   * Calls `gone` once the process `incarnation` of the replica `replica` of `service` no longer answers presence:
   * nobody answers for the name (the process ended, or was killed), or a later process under the same name does
   * (a pod started again). Returns what stops the watching.
   */
  watch(service: string, replica: string, incarnation: string, gone: () => void): () => void;
  stop(): void;
}

/**
 * Watches over NATS presence (`natsPresence`): each process watched is asked every `intervalMs` (one request
 * however many callers wait on it), so that a killed one is known within about that long. As for `isGone`, an
 * answer that is late, or a connection that is not there or reconnecting, is not "gone".
 */
export function watchReplicas(
  connection: () => Promise<NatsConnection>,
  options: { prefix?: string; intervalMs?: number; timeoutMs?: number } = {},
): ReplicaWatch {
  const names = natsNames(options.prefix);
  const timeout = options.timeoutMs ?? 2_000;
  type Watched = { subject: string; incarnation: string; waiters: Set<() => void>; asking: boolean };
  const watched = new Map<string, Watched>();
  const ask = async (key: string, entry: Watched) => {
    entry.asking = true;
    let gone: boolean;
    try {
      const answer = (await (await connection()).request(entry.subject, undefined, { timeout })).string();
      // An empty answer is a process of an earlier release, which says no incarnation.
      gone = answer !== '' && answer !== entry.incarnation;
    } catch (error) {
      gone = error instanceof RequestError && error.isNoResponders();
    } finally {
      entry.asking = false;
    }
    if (!gone || watched.get(key) !== entry) return;
    watched.delete(key);
    for (const waiter of entry.waiters) waiter();
  };
  const timer = setInterval(() => {
    for (const [key, entry] of watched) if (!entry.asking) void ask(key, entry);
  }, options.intervalMs ?? 1_000);
  timer.unref();
  return {
    watch(service, replica, incarnation, gone) {
      const subject = names.presence(service, replica);
      const key = `${subject} ${incarnation}`;
      let entry = watched.get(key);
      if (!entry) {
        entry = { subject, incarnation, waiters: new Set(), asking: false };
        watched.set(key, entry);
      }
      const watching = entry;
      watching.waiters.add(gone);
      return () => {
        watching.waiters.delete(gone);
        if (watching.waiters.size === 0 && watched.get(key) === watching) watched.delete(key);
      };
    },
    stop() {
      clearInterval(timer);
      watched.clear();
    },
  };
}
