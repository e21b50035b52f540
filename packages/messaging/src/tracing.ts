import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { Reply } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { type Attributes, inSpan, markSpanError, type Span, withTraceHeaders } from '@oc/telemetry';
import { from, lastValueFrom, type Observable } from 'rxjs';
import type { RequestOptions, ServiceClient } from './port';
import { headersOf, type MessageContext } from './wire';

/**
 * Spans follow OpenTelemetry's messaging conventions: `send <subject>` (a request, whose sender waits for the
 * reply: CLIENT), `process <subject>` where a handler runs (CONSUMER), `publish <subject>` where the outbox relay
 * hands an event to JetStream (PRODUCER). Trace context crosses every hop in a lower-case `traceparent` header.
 */
const messaging = (system: string, destination: string, operation: 'send' | 'process' | 'publish', extra: Attributes = {}): Attributes => ({
  'messaging.system': system,
  'messaging.destination.name': destination,
  'messaging.operation.type': operation === 'publish' ? 'send' : operation,
  'messaging.operation.name': operation,
  ...extra,
});

/** An answer that is an error: 4xx answers are the caller's to handle, 5xx are the span's failure. */
function noteReply(span: Span | undefined, reply: Reply<unknown>): void {
  if (!span || reply.ok) return;
  span.setAttribute('oc.error.code', reply.error.code);
  span.setAttribute('oc.error.status', reply.error.status);
  if (reply.error.status >= 500) markSpanError(span, reply.error.code, reply.error.message);
}

/**
 * A `ServiceClient` whose requests are `send` spans carrying their trace context to the handler. Processes with
 * telemetry on wrap their client with it; the client itself stays as it was.
 */
export function traceServiceClient(client: ServiceClient, options: { system: string; destination?: (subject: string) => string }): ServiceClient {
  const destination = options.destination ?? ((subject: string) => subject);
  return {
    request<T>(subject: string, payload: unknown, requestOptions: RequestOptions = {}): Promise<Reply<T>> {
      const name = destination(subject);
      return inSpan(`send ${name}`, { kind: 'client', attributes: messaging(options.system, name, 'send') }, async (span) => {
        const reply = await client.request<T>(subject, payload, { ...requestOptions, headers: withTraceHeaders(requestOptions.headers) });
        noteReply(span, reply as Reply<unknown>);
        return reply;
      });
    },
    broadcast: (subject, payload) => client.broadcast(subject, payload),
    onBroadcast: (subject, handler) => client.onBroadcast(subject, handler),
    ping: () => client.ping(),
    close: () => client.close(),
  };
}

/**
 * Where a service's handlers run: a `process <subject>` span continuing the caller's `traceparent` (from the NATS
 * headers, or what the in-process transports hand over the same way). Registered only when telemetry is on, so
 * Nest's handler path is the same as before otherwise.
 */
export class MessageTracingInterceptor implements NestInterceptor {
  constructor(private readonly system: string) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    const message = context.switchToRpc().getContext<MessageContext>();
    const subject = message.getSubject();
    const headers = headersOf(message);
    return from(
      inSpan(
        `process ${operationOf(subject)}`,
        { kind: 'consumer', parent: headers.traceparent, attributes: messaging(this.system, subject, 'process') },
        async (span) => {
          const reply = await lastValueFrom(next.handle(), { defaultValue: undefined });
          if (reply && typeof reply === 'object' && 'ok' in reply) noteReply(span, reply as Reply<unknown>);
          return reply;
        },
      ),
    );
  }
}

/**
 * A request sent to an organization's partition owner (`<prefix>.partitions.<p>.<subject>`, see `partitions.ts`)
 * is named by its subject, as its sender's span is: one span name per operation, not one per partition. The
 * subject it came on stays `messaging.destination.name`.
 */
const operationOf = (subject: string) => subject.replace(/(^|\.)partitions\.\d+\./, '$1');

/** A stored event's consumer: a `process` span continuing the trace of the message or the event itself. */
export function processEvent(
  system: string,
  destination: string,
  consumer: string,
  event: StoredEvent,
  traceparent: string | undefined,
  handle: () => Promise<void>,
): Promise<void> {
  return inSpan(
    `process ${destination}`,
    {
      kind: 'consumer',
      parent: traceparent ?? event.metadata.traceparent,
      attributes: messaging(system, destination, 'process', {
        'messaging.message.id': event.id,
        'messaging.consumer.group.name': consumer,
        'oc.event_type': event.type,
      }),
    },
    handle,
  );
}

/** The outbox relay's hand-over of one event: a `publish` span in the trace the event was stored in. */
export function publishEvent<T>(system: string, destination: string, event: StoredEvent, publish: (traceHeaders: Record<string, string>) => Promise<T>): Promise<T> {
  return inSpan(
    `publish ${destination}`,
    {
      kind: 'producer',
      parent: event.metadata.traceparent,
      attributes: messaging(system, destination, 'publish', { 'messaging.message.id': event.id, 'oc.event_type': event.type }),
    },
    () => publish(withTraceHeaders(undefined)),
  );
}
