import { Logger } from '@nestjs/common';
import {
  NatsContext,
  Server,
  type CustomTransportStrategy,
  type MessageHandler,
} from '@nestjs/microservices';
import { EmptyError, firstValueFrom, isObservable } from 'rxjs';
import { fail, serviceUnavailable, type Reply } from '@oc/contracts';
import type { Subscription } from '@oc/eventstore';
import type { RequestOptions, ServiceClient } from './port';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  RemoteHandlerError,
  deliverSafely,
  failureReply,
  toNatsHeaders,
  wireCopy,
} from './wire';

type Responder = (data: unknown, headers: Record<string, string> | undefined) => Promise<unknown>;
type Subscriber = (payload: unknown) => void;

/**
 * The in-process stand-in for the NATS server: one per process, shared by every service's
 * strategy and every client. Payloads are copied on each hop, as serialization would.
 */
export class InProcessBroker {
  private readonly responders = new Map<string, Responder[]>();
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  private readonly logger = new Logger(InProcessBroker.name);

  /** Replicas of one subject share its requests round-robin, like a NATS queue group. */
  respond(subject: string, responder: Responder): () => void {
    const replicas = this.responders.get(subject) ?? [];
    replicas.push(responder);
    this.responders.set(subject, replicas);
    return () => {
      const index = replicas.indexOf(responder);
      if (index >= 0) replicas.splice(index, 1);
      if (replicas.length === 0) this.responders.delete(subject);
    };
  }

  /**
   * The answer, or `undefined` when nobody serves the subject (NATS: no responders). With `copied`, the
   * payload is already the caller's no longer (it crossed a thread) and the answer will be copied on its way
   * back, so neither is copied here.
   */
  request(
    subject: string,
    payload: unknown,
    headers?: Record<string, string>,
    options: { copied?: boolean } = {},
  ): Promise<unknown> | undefined {
    const replicas = this.responders.get(subject);
    const responder = replicas?.shift();
    if (!replicas || !responder) return undefined;
    replicas.push(responder);
    if (options.copied) return responder(payload, headers);
    return responder(wireCopy(payload), headers && { ...headers }).then(wireCopy);
  }

  publish(subject: string, payload: unknown): void {
    for (const subscriber of this.subscribers.get(subject) ?? []) {
      deliverSafely(() => subscriber(wireCopy(payload ?? null)), (error) => this.logger.error(error));
    }
  }

  subscribe(subject: string, subscriber: Subscriber): () => void {
    const subscribers = this.subscribers.get(subject) ?? new Set();
    subscribers.add(subscriber);
    this.subscribers.set(subject, subscribers);
    return () => {
      subscribers.delete(subscriber);
      if (subscribers.size === 0) this.subscribers.delete(subject);
    };
  }
}

/**
 * Nest transport over the in-process broker: `createMicroservice(AppModule, { strategy })`.
 * Handlers get a real `NatsContext`, so controllers run unchanged in both modes.
 */
export class InProcessServerStrategy extends Server implements CustomTransportStrategy {
  private readonly unregister: Array<() => void> = [];

  constructor(private readonly broker: InProcessBroker) {
    super();
  }

  listen(callback: (...optionalParams: unknown[]) => void): void {
    for (const [subject, handler] of this.messageHandlers) {
      // Only request/reply crosses this transport; events travel through a DurableEventBus.
      if (handler.isEventHandler) continue;
      this.unregister.push(
        this.broker.respond(subject, (data, headers) =>
          this.answer(handler, data, new NatsContext([subject, toNatsHeaders(headers)])),
        ),
      );
    }
    this._status$.next('connected');
    callback();
  }

  close(): void {
    for (const unregister of this.unregister.splice(0)) unregister();
  }

  /** No connection, hence no status events to listen to. */
  on(): void {}

  unwrap<T>(): T {
    return this.broker as T;
  }

  /**
   * The handler Nest built for the pattern (its guards, pipes, interceptors and exception filters), answered
   * with its first value as ClientNats does; not through `Server.handleRequest` and `send`, whose rxjs pipeline,
   * processing hooks (none is set here) and `process.nextTick` add a few turns of the microtask queue to every
   * answer, for nothing a one-shot answer needs.
   */
  private async answer(handler: MessageHandler, data: unknown, ctx: NatsContext): Promise<unknown> {
    const result: unknown = await handler(data, ctx);
    if (!isObservable(result)) return result;
    try {
      return await firstValueFrom(result);
    } catch (error) {
      if (error instanceof EmptyError) throw new Error('The handler completed without an answer');
      throw new RemoteHandlerError(error);
    }
  }
}

export class InProcessServiceClient implements ServiceClient {
  private readonly subscriptions = new Set<() => void>();

  constructor(private readonly broker: InProcessBroker) {}

  async request<T>(subject: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<T>> {
    try {
      const answer = this.broker.request(subject, payload, options.headers);
      if (!answer) return fail(serviceUnavailable());
      return (await withTimeout(answer, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS)) as Reply<T>;
    } catch (error) {
      return failureReply(error);
    }
  }

  async broadcast(subject: string, payload: unknown): Promise<void> {
    this.broker.publish(subject, payload);
  }

  async onBroadcast(subject: string, handler: (payload: unknown) => void): Promise<Subscription> {
    const unsubscribe = this.broker.subscribe(subject, handler);
    this.subscriptions.add(unsubscribe);
    return {
      stop: async () => {
        unsubscribe();
        this.subscriptions.delete(unsubscribe);
      },
    };
  }

  async ping(): Promise<void> {}

  /** Like closing a NATS connection: this client's broadcast subscriptions end. */
  async close(): Promise<void> {
    for (const unsubscribe of this.subscriptions) unsubscribe();
    this.subscriptions.clear();
  }
}

function withTimeout<T>(answer: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`No answer within ${ms} ms`)), ms);
  });
  return Promise.race([answer, expired]).finally(() => clearTimeout(timer));
}
