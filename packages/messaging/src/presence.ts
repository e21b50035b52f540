import { type NatsConnection, RequestError } from '@nats-io/transport-node';
import { natsNames, type Replicas } from '@oc/contracts';

/** Another running process already answers for this replica's name. */
export class ReplicaNameInUseError extends Error {
  constructor(readonly service: string, readonly replica: string) {
    super(`Another running ${service} process already uses the replica name '${replica}'; give each replica its own REPLICA_ID`);
    this.name = 'ReplicaNameInUseError';
  }
}

export interface NatsPresence extends Replicas {
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
  const subscription = nc.subscribe(names.presence(service, self), { callback: (_error, msg) => void msg.respond() });
  // The server has the interest before anyone is told this replica is up.
  await nc.flush();
  return {
    self,
    shared: true,
    isGone: async (replica) => replica !== self && (await answers(replica)) === false,
    stop: async () => subscription.unsubscribe(),
  };
}
