import type { MessagePort } from 'node:worker_threads';
import { Logger } from '@nestjs/common';
import { fail, serviceUnavailable, type Reply } from '@oc/contracts';
import type { Subscription } from '@oc/eventstore';
import type { InProcessBroker } from './in-process';
import type { RequestOptions, ServiceClient } from './port';
import { DEFAULT_REQUEST_TIMEOUT_MS, deliverSafely, failureReply, wireCopy } from './wire';

/** Answered by the serving side itself: the other thread is there and reading its port. */
const PING_SUBJECT = '_thread.ping';

/** What crosses the port: requests and their answers, broadcasts, and which broadcasts a side wants. */
type Envelope =
  | { kind: 'request'; id: number; subject: string; payload: unknown; headers?: Record<string, string> }
  | { kind: 'answer'; id: number; reply: Reply<unknown> }
  | { kind: 'broadcast'; subject: string; payload: unknown }
  | { kind: 'subscribe' | 'unsubscribe'; subject: string };

/**
 * One side of a port. What a side sends during one turn of its event loop goes in one message, so that a
 * burst of requests (or of a stream's frames) wakes the other thread once rather than once each. Payloads
 * are copied as the wire copies them (`wireCopy`: what a JSON round trip gives, strings shared), then the
 * port clones them; so a handler sees what it would see over NATS.
 */
class Side {
  private outbox: Envelope[] = [];
  private flushing = false;

  constructor(
    private readonly port: MessagePort,
    receive: (envelope: Envelope) => void,
  ) {
    port.on('message', (batch: Envelope[]) => {
      for (const envelope of batch) receive(envelope);
    });
  }

  send(envelope: Envelope): void {
    this.outbox.push(envelope);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  /** Sends what is waiting, then closes the port. */
  close(): void {
    this.flush();
    this.port.close();
  }

  private flush(): void {
    this.flushing = false;
    if (this.outbox.length === 0) return;
    const batch = this.outbox;
    this.outbox = [];
    this.port.postMessage(batch);
  }
}

/**
 * The services' end of a port to another thread (the gateway's, in standalone mode): serves the other
 * thread's requests from the in-process broker, as a NATS server would serve another process's, and hands
 * it the broadcasts it subscribes to.
 */
export function serveThreadClient(broker: InProcessBroker, port: MessagePort): { close(): void } {
  const logger = new Logger('ThreadTransport');
  const subscriptions = new Map<string, () => void>();
  const side = new Side(port, (envelope) => {
    switch (envelope.kind) {
      case 'request': {
        if (envelope.subject === PING_SUBJECT) return side.send({ kind: 'answer', id: envelope.id, reply: { ok: true, data: null } });
        const answered = broker.request(envelope.subject, envelope.payload, envelope.headers, { copied: true });
        const answer = (reply: Reply<unknown>) => side.send({ kind: 'answer', id: envelope.id, reply: wireCopy(reply) });
        if (!answered) answer(fail(serviceUnavailable()));
        else answered.then((reply) => answer(reply as Reply<unknown>), (error: unknown) => answer(failureReply(error)));
        return;
      }
      case 'broadcast':
        broker.publish(envelope.subject, envelope.payload);
        return;
      case 'subscribe':
        if (!subscriptions.has(envelope.subject)) {
          const subject = envelope.subject;
          subscriptions.set(
            subject,
            broker.subscribe(subject, (payload) => side.send({ kind: 'broadcast', subject, payload })),
          );
        }
        return;
      case 'unsubscribe':
        subscriptions.get(envelope.subject)?.();
        subscriptions.delete(envelope.subject);
        return;
      case 'answer':
        logger.warn('An answer arrived at the serving side of a thread port; ignored');
    }
  });
  return {
    close() {
      for (const unsubscribe of subscriptions.values()) unsubscribe();
      subscriptions.clear();
      side.close();
    },
  };
}

/**
 * A `ServiceClient` in another thread of the process than the services (the gateway's thread in standalone
 * mode), over a `MessagePort` served by `serveThreadClient`. Same semantics as the other transports: requests
 * never reject, a timeout or a missing responder is a 503, broadcasts reach every subscriber.
 */
export class ThreadServiceClient implements ServiceClient {
  private readonly logger = new Logger(ThreadServiceClient.name);
  private readonly side: Side;
  private readonly pending = new Map<number, (reply: Reply<unknown>) => void>();
  private readonly handlers = new Map<string, Set<(payload: unknown) => void>>();
  private nextId = 0;
  private closed = false;

  constructor(port: MessagePort) {
    this.side = new Side(port, (envelope) => {
      if (envelope.kind === 'answer') {
        this.pending.get(envelope.id)?.(envelope.reply);
        this.pending.delete(envelope.id);
      } else if (envelope.kind === 'broadcast') {
        for (const handler of this.handlers.get(envelope.subject) ?? []) {
          // Each subscriber its own copy, as each would get from NATS.
          deliverSafely(() => handler(wireCopy(envelope.payload ?? null)), (error) => this.logger.error(error));
        }
      }
    });
  }

  request<T>(subject: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<T>> {
    if (this.closed) return Promise.resolve(fail(serviceUnavailable()));
    const id = this.nextId++;
    return new Promise<Reply<T>>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve(failureReply(new Error(`No answer within ${options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS} ms`)));
      }, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
      this.pending.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply as Reply<T>);
      });
      this.side.send({
        kind: 'request',
        id,
        subject,
        payload: wireCopy(payload),
        ...(options.headers ? { headers: { ...options.headers } } : {}),
      });
    });
  }

  async broadcast(subject: string, payload: unknown): Promise<void> {
    if (!this.closed) this.side.send({ kind: 'broadcast', subject, payload: wireCopy(payload ?? null) });
  }

  async onBroadcast(subject: string, handler: (payload: unknown) => void): Promise<Subscription> {
    let handlers = this.handlers.get(subject);
    if (!handlers) {
      this.handlers.set(subject, (handlers = new Set()));
      this.side.send({ kind: 'subscribe', subject });
    }
    handlers.add(handler);
    return {
      stop: async () => {
        handlers.delete(handler);
        if (handlers.size > 0 || this.handlers.get(subject) !== handlers) return;
        this.handlers.delete(subject);
        if (!this.closed) this.side.send({ kind: 'unsubscribe', subject });
      },
    };
  }

  async ping(): Promise<void> {
    const reply = await this.request(PING_SUBJECT, {}, { timeoutMs: 2_000 });
    if (!reply.ok) throw new Error(`The services' thread did not answer: ${reply.error.message}`);
  }

  /** Like closing a NATS connection: pending requests answer 503, this client's subscriptions end. */
  async close(): Promise<void> {
    if (this.closed) return;
    for (const subject of this.handlers.keys()) this.side.send({ kind: 'unsubscribe', subject });
    this.handlers.clear();
    this.closed = true;
    for (const resolve of this.pending.values()) resolve(fail(serviceUnavailable()));
    this.pending.clear();
    this.side.close();
  }
}
