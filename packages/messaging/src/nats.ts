import { setTimeout as sleep } from 'node:timers/promises';
import { type Msg, type NatsConnection, RequestError, type Subscription as NatsSubscription } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { ClientNats, type NatsContext, NatsRecordBuilder, ServerNats, type NatsOptions } from '@nestjs/microservices';
import { natsNames, type NatsNames, type Reply } from '@oc/contracts';
import type { Subscription } from '@oc/eventstore';
import { firstValueFrom, timeout } from 'rxjs';
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
// silently deaf after a NATS restart; keep reconnecting instead.
const RECONNECT_FOREVER = { maxReconnectAttempts: -1 } as const;

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

/**
 * Nest's NATS transport for `NestFactory.createMicroservice(AppModule, { strategy })`. Every
 * replica of a service subscribes in the same queue group, so each request reaches one of them.
 */
export function natsServerStrategy({ prefix, ...options }: NatsDeploymentOptions & { queue: string }): DrainingServerNats {
  return new ReadyServerNats({ ...RECONNECT_FOREVER, ...options }, natsNames(prefix));
}

class ReadyServerNats extends ServerNats implements DrainingServerNats {
  private readonly queue: string | undefined;
  /** Requests taken and not answered yet. */
  private readonly unanswered = new Set<Msg>();
  private allAnswered: (() => void) | undefined;

  constructor(
    options: NatsConnectOptions & { queue: string },
    private readonly names: NatsNames,
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
    super.start(() => void this.unwrap<NatsConnection>().flush().then(() => callback(), callback));
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
    const subscriptions = (this as unknown as { subscriptions: NatsSubscription[] }).subscriptions;
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

class ReplyClientNats extends ClientNats {
  // A handler's failure arrives as plain data from Nest's exception filter; transport failures are
  // Error instances. Tagging the former keeps the two apart.
  protected override serializeError(err: unknown): unknown {
    return err instanceof Error ? err : new RemoteHandlerError(err);
  }
}

/**
 * Requests go through Nest's ClientNats so the framing matches Nest's server; broadcasts are plain
 * core NATS publish/subscribe of JSON on the same connection.
 */
export class NatsServiceClient implements ServiceClient {
  private readonly client: ClientNats;
  private readonly logger = new Logger(NatsServiceClient.name);
  private readonly names: NatsNames;

  constructor({ prefix, ...options }: NatsDeploymentOptions) {
    this.client = new ReplyClientNats({ ...RECONNECT_FOREVER, ...options });
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

  async request<T>(subject: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<T>> {
    const record = new NatsRecordBuilder(payload).setHeaders(toNatsHeaders(options.headers)).build();
    try {
      return await firstValueFrom(
        this.client.send<Reply<T>>(this.names.subject(subject), record).pipe(timeout(options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS)),
      );
    } catch (error) {
      return failureReply(error);
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
