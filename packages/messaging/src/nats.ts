import { setTimeout as sleep } from 'node:timers/promises';
import { type Msg, type NatsConnection, RequestError, type Subscription as NatsSubscription } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { ClientNats, type NatsContext, type NatsOptions, ServerNats } from '@nestjs/microservices';
import { natsNames, type NatsNames, type Reply } from '@oc/contracts';
import type { Subscription } from '@oc/eventstore';
import { ORGANIZATION_SUBJECTS, partitionMembership, partitionSubject, requestPartition } from './partitions';
import type { RequestOptions, ServiceClient } from './port';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  RemoteHandlerError,
  deliverSafely,
  failureReply,
  toNatsHeaders,
} from './wire';

export type NatsConnectOptions = NonNullable<NatsOptions['options']>;
/** The connection, and the deployment's `NATS_PREFIX` (default `oc`). */
export type NatsDeploymentOptions = NatsConnectOptions & { prefix?: string };

// The client library gives up after 10 reconnect attempts by default, which would leave a service
// silently deaf after a NATS restart; keep reconnecting instead. Without async traces, a request or a flush does
// not build an Error (and its stack) ahead in case it fails: 3-4% of chat's and billing's CPU under load.
const RECONNECT_FOREVER = { maxReconnectAttempts: -1, noAsyncTraces: true } as const;

/** Flushes tried while reconnecting, one per server tried at most: a cluster of up to five, or one down for good. */
const FLUSH_ATTEMPTS = 5;

/** Nest's NATS server, which a stopping process drains before it closes. */
export interface DrainingServerNats extends ServerNats {
  /**
   * Takes no more requests (the queue group gives them to the other replicas at once) and waits until those
   * taken are answered, for up to `timeoutMs`; the connection stays open for their answers until `close`.
   */
  drain(timeoutMs: number): Promise<void>;
}

/** This replica among its service's: named, it owns a share of the organizations' partitions (`partitions.ts`). */
export interface PartitionOwner {
  service: string;
  self: string;
}

/**
 * Nest's NATS transport for `NestFactory.createMicroservice(AppModule, { strategy })`. Every
 * replica of a service subscribes in the same queue group, so each request reaches one of them. With `owner`, a
 * service that handles organization-partitioned subjects (`ORGANIZATION_SUBJECTS`) also hears them on the subjects
 * of the partitions it owns, where callers send them first.
 */
export function natsServerStrategy({ prefix, owner, ...options }: NatsDeploymentOptions & { queue: string; owner?: PartitionOwner }): DrainingServerNats {
  return new ReadyServerNats({ ...RECONNECT_FOREVER, ...options }, natsNames(prefix), prefix, owner);
}

class ReadyServerNats extends ServerNats implements DrainingServerNats {
  private readonly queue: string | undefined;
  /** Requests taken and not answered yet. */
  private readonly unanswered = new Set<Msg>();
  private allAnswered: (() => void) | undefined;
  /** The partitions this replica owns, each heard on `<prefix>.partitions.<p>.>`. */
  private readonly partitions = new Map<number, NatsSubscription>();
  private membership: { stop(): Promise<void> } | undefined;

  constructor(
    options: NatsConnectOptions & { queue: string },
    private readonly names: NatsNames,
    private readonly prefix: string | undefined,
    private readonly owner: PartitionOwner | undefined,
  ) {
    super(options);
    this.queue = options.queue;
  }

  // Handlers are registered under the plain subjects (`@MessagePattern(Subjects.…)`); on the server they
  // listen under the deployment's prefix, and are found again by the plain one.
  override bindEvents(client: NatsConnection): void {
    const subscriptions = (this as unknown as { subscriptions: unknown[] }).subscriptions;
    for (const [channel, handler] of this.messageHandlers) {
      subscriptions.push(
        client.subscribe(this.names.subject(channel), {
          queue: (handler.extras?.queue as string | undefined) ?? this.queue,
          callback: this.getMessageHandler(channel).bind(this),
        }),
      );
    }
  }

  // Nest reports "listening" once the subscriptions are merely queued; waiting until the server has
  // them means a request sent after `listen()` resolved cannot meet "no responders".
  override start(callback: (err?: unknown, ...optionalParams: unknown[]) => void): void {
    super.start(() => void this.unwrap<NatsConnection>().flush().then(() => this.joinPartitions()).then(() => callback(), callback));
  }

  private async joinPartitions(): Promise<void> {
    const partitioned = [...this.messageHandlers.keys()].some((channel) => ORGANIZATION_SUBJECTS.has(channel));
    if (!this.owner || !partitioned) return;
    const nc = this.unwrap<NatsConnection>();
    this.membership = await partitionMembership(nc, {
      ...this.owner,
      ...(this.prefix === undefined ? {} : { prefix: this.prefix }),
      onChange: (owned) => {
        for (const [partition, subscription] of this.partitions) {
          if (owned.has(partition)) continue;
          this.partitions.delete(partition);
          // What the server sent before it heard the unsubscription is still answered here.
          void subscription.drain().catch(() => undefined);
        }
        for (const partition of owned) {
          if (this.partitions.has(partition)) continue;
          const head = this.names.subject(partitionSubject(partition, ''));
          const subscription = nc.subscribe(`${head}>`, {
            queue: this.queue,
            callback: (error, message) => {
              const channel = message.subject.slice(head.length);
              if (ORGANIZATION_SUBJECTS.has(channel)) void this.getMessageHandler(channel)(error, message);
            },
          });
          this.partitions.set(partition, subscription);
        }
      },
    });
  }

  /** Says it leaves, so that the others take its partitions at once rather than when it is no longer heard. */
  private async leavePartitions(): Promise<void> {
    const membership = this.membership;
    this.membership = undefined;
    await membership?.stop().catch(() => undefined);
  }

  override async close(): Promise<void> {
    await this.leavePartitions();
    await super.close();
  }

  // Counted from the moment the subscription hands the request over, until its answer is published.
  override handleMessage(channel: string, natsMsg: Msg): Promise<unknown> {
    if (!natsMsg.reply) return super.handleMessage(channel, natsMsg);
    this.unanswered.add(natsMsg);
    return super.handleMessage(channel, natsMsg).catch((error: unknown) => {
      this.answered(natsMsg);
      throw error;
    });
  }

  override getPublisher(natsMsg: Msg, id: string, ctx: NatsContext): (response: unknown) => unknown {
    const publish = super.getPublisher(natsMsg, id, ctx);
    return (response) => {
      try {
        return publish(response);
      } finally {
        this.answered(natsMsg);
      }
    };
  }

  async drain(timeoutMs: number): Promise<void> {
    await this.leavePartitions();
    const subscriptions = [...(this as unknown as { subscriptions: NatsSubscription[] }).subscriptions, ...this.partitions.values()];
    const answered = async () => {
      // A subscription drained still hands over what the server sent it before it heard the unsubscription.
      await Promise.all(subscriptions.map((subscription) => subscription.drain().catch(() => undefined)));
      if (this.unanswered.size > 0) await new Promise<void>((resolve) => (this.allAnswered = resolve));
      await this.unwrap<NatsConnection>().flush();
    };
    // Bounded: a NATS server out of reach would hold the drain, and the answers, for good.
    const waited = new AbortController();
    await Promise.race([answered(), sleep(timeoutMs, undefined, { signal: waited.signal }).catch(() => undefined)]);
    waited.abort();
  }

  private answered(natsMsg: Msg) {
    if (this.unanswered.delete(natsMsg) && this.unanswered.size === 0) this.allAnswered?.();
  }
}

/** No subscriber heard the request (the server's "no responders"). */
const NOBODY = Symbol('no responders');

/** A Nest server's answer: the handler's value, or what it threw. */
interface NestAnswer<T> {
  response?: Reply<T>;
  err?: unknown;
}

/**
 * Requests are framed as Nest's ClientNats frames them, for Nest's server, but sent with the connection's own
 * request, whose replies all come to one inbox subscription: Nest's client subscribed and unsubscribed an inbox
 * per request. Broadcasts are plain core NATS publish/subscribe of JSON on the same connection.
 */
export class NatsServiceClient implements ServiceClient {
  private readonly client: ClientNats;
  private nextId = 0;
  private readonly logger = new Logger(NatsServiceClient.name);
  private readonly names: NatsNames;

  constructor({ prefix, ...options }: NatsDeploymentOptions) {
    this.client = new ClientNats({ ...RECONNECT_FOREVER, ...options });
    this.names = natsNames(prefix);
  }

  /** The underlying connection, e.g. for JetStream (`jetstream(nc)`). */
  async connection(): Promise<NatsConnection> {
    return (await this.client.connect()) as NatsConnection;
  }

  /**
   * The connection once made, also while it reconnects: Nest's `connect()` refuses from a disconnect until the
   * reconnect (its server gone, in a cluster), where the connection itself keeps what is sent for the server it
   * reconnects to, subscriptions included.
   */
  private held: Promise<NatsConnection> | undefined;
  private heldConnection(): Promise<NatsConnection> {
    this.held ??= this.connection().catch((error: unknown) => {
      this.held = undefined;
      throw error;
    });
    return this.held;
  }

  /**
   * A request on an organization's account goes to the replica owning its partition first; when nobody owns it
   * at this moment (its owner just stopped or was killed), to any replica. A request nobody heard was not
   * handled, so sending it again is safe.
   */
  async request<T>(subject: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<T>> {
    const partition = requestPartition(subject, payload);
    if (partition !== undefined) {
      const owned = await this.send<T>(partitionSubject(partition, subject), payload, options);
      if (owned !== NOBODY) return owned;
    }
    const reply = await this.send<T>(subject, payload, options);
    return reply === NOBODY ? failureReply(new Error(`No responders on ${subject}`)) : reply;
  }

  private async send<T>(subject: string, payload: unknown, options: RequestOptions): Promise<Reply<T> | typeof NOBODY> {
    const pattern = this.names.subject(subject);
    try {
      const nc = await this.heldConnection();
      const packet = JSON.stringify({ pattern, data: payload, id: String(++this.nextId) });
      const headers = toNatsHeaders(options.headers);
      const message = await nc.request(pattern, packet, { timeout: options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, ...(headers ? { headers } : {}) });
      const answer = message.json<NestAnswer<T>>();
      if (answer.err !== undefined && answer.err !== null) return failureReply(new RemoteHandlerError(answer.err));
      return answer.response as Reply<T>;
    } catch (error) {
      return error instanceof RequestError && error.isNoResponders() ? NOBODY : failureReply(error);
    }
  }

  async broadcast(subject: string, payload: unknown): Promise<void> {
    const nc = await this.heldConnection();
    nc.publish(this.names.subject(subject), JSON.stringify(payload ?? null));
    // Flushed so the notice is at the server before anything this caller sends next on another
    // connection (e.g. billing's answer to a key revocation).
    await nc.flush();
  }

  async onBroadcast(subject: string, handler: (payload: unknown) => void): Promise<Subscription> {
    const nc = await this.heldConnection();
    const subscription = nc.subscribe(this.names.subject(subject), {
      callback: (error, msg) => {
        if (error) return this.logger.error(error);
        deliverSafely(() => handler(msg.json()), (e) => this.logger.error(e));
      },
    });
    // Once the server has the interest, a broadcast sent from anywhere afterwards reaches us. A flush cut by the
    // connection's loss (its server gone, in a cluster) is asked again, as each server the client then tries cuts it
    // too: the client subscribes anew on the server it reconnects to before that flush comes back.
    for (let attempt = 1; ; attempt++) {
      try {
        await nc.flush();
        break;
      } catch (error) {
        if (!(error instanceof RequestError) || attempt === FLUSH_ATTEMPTS) throw error;
      }
    }
    return { stop: async () => subscription.unsubscribe() };
  }

  async ping(): Promise<void> {
    await (await this.connection()).flush();
  }

  async close(): Promise<void> {
    this.held = undefined;
    await this.client.close();
  }
}
