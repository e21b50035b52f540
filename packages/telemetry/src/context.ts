import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  isSpanContextValid,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { telemetryEnabled } from './state';

export type TraceHeaders = Record<string, string>;
export type { Attributes, Span };

const tracer = () => trace.getTracer('oc');

/** W3C `traceparent`/`tracestate` of the active context, for hops no instrumentation covers (NATS). */
export function injectTraceHeaders(): TraceHeaders {
  const headers: TraceHeaders = {};
  // NATS header keys are case-sensitive, so the keys are pinned to lower case whatever the propagator.
  propagation.inject(context.active(), headers, {
    set: (carrier, key, value) => {
      carrier[key.toLowerCase()] = value;
    },
  });
  return headers;
}

export function withExtractedContext<T>(headers: Record<string, string | string[] | undefined>, fn: () => T): T {
  return context.with(propagation.extract(context.active(), headers), fn);
}

/** The context a stored `traceparent` names (async work resumed later), or the active one when there is none. */
function contextOf(traceparent: string | undefined): Context {
  return traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : context.active();
}

export type Kind = 'internal' | 'client' | 'server' | 'producer' | 'consumer';
const KINDS: Record<Kind, SpanKind> = {
  internal: SpanKind.INTERNAL,
  client: SpanKind.CLIENT,
  server: SpanKind.SERVER,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

export interface SpanOptions {
  kind?: Kind;
  attributes?: Attributes;
  /**
   * The parent, as a stored or received `traceparent` (work resumed from an event, a message from another
   * process); the active span when absent.
   */
  parent?: string | undefined;
  /** Other traces this span continues (a batch of events from several requests): their `traceparent`s. */
  links?: readonly (string | undefined)[];
}

/**
 * Runs `fn` in a new active span that ends when `fn` settles; a throw is recorded on it and rethrown. With
 * telemetry off it only calls `fn` (with no span), so callers on hot paths pay one call.
 */
export function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!telemetryEnabled()) return fn(undefined);
  const parent = contextOf(options.parent);
  const span = tracer().startSpan(
    name,
    { kind: KINDS[options.kind ?? 'internal'], attributes: options.attributes, links: options.links && linksOf(options.links) },
    parent,
  );
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** `withSpan` as before `inSpan`: always a span (tests, tools), whatever the process configured. */
export async function withSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T> | T): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

export function failSpan(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/** Marks a span failed without an exception (an error answer), with the error's type as `error.type`. */
export function markSpanError(span: Span, type: string, message?: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message } : {}) });
}

function linksOf(traceparents: readonly (string | undefined)[]): Link[] {
  const links: Link[] = [];
  const seen = new Set<string>();
  for (const traceparent of traceparents) {
    if (!traceparent || seen.has(traceparent)) continue;
    seen.add(traceparent);
    const linked = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent }));
    if (linked && isSpanContextValid(linked)) links.push({ context: linked });
    // OpenTelemetry keeps 128 links per span by default; a larger batch names its first ones.
    if (links.length === 128) break;
  }
  return links;
}

/** The active span as event metadata records it: its `traceparent`, trace id and span id; none outside a span. */
export function activeTrace(): { traceparent: string; traceId: string; spanId: string } | undefined {
  if (!telemetryEnabled()) return undefined;
  const span = trace.getActiveSpan()?.spanContext();
  if (!span || !isSpanContextValid(span)) return undefined;
  const flags = span.traceFlags.toString(16).padStart(2, '0');
  return { traceparent: `00-${span.traceId}-${span.spanId}-${flags}`, traceId: span.traceId, spanId: span.spanId };
}

/** `headers` plus the active trace context (`traceparent`, lower case), in a new object. */
export function withTraceHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  return Object.assign({}, headers, injectTraceHeaders());
}

/**
 * The HTTP instrumentation keeps a mutable record in the request's context from which it names the server span
 * and labels `http.server.request.duration` (`http.route`), the record Express's instrumentation fills. It is
 * `@opentelemetry/core`'s RPC metadata, found by the key core makes (`createContextKey` gives `Symbol.for` of
 * its description), so core is not loaded for it; a test checks this against core itself.
 */
const RPC_METADATA = createContextKey('OpenTelemetry SDK Context Key RPC_METADATA');

/** Names the request's route template (`/v1/videos/:video_id`) on its server span and duration metric. */
export function setHttpRoute(route: string): void {
  if (!telemetryEnabled()) return;
  const metadata = context.active().getValue(RPC_METADATA) as { type?: string; route?: string } | undefined;
  if (metadata?.type === 'http') metadata.route = route;
}

/** Attributes of the active span (a request's server span), with telemetry on. */
export function setActiveSpanAttributes(attributes: Attributes): void {
  if (!telemetryEnabled()) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/**
 * A span that is not made active, for work whose end is not a promise's (an upstream's stream of chunks); the
 * caller ends it. `undefined` with telemetry off.
 */
export function startSpan(name: string, options: SpanOptions): Span | undefined {
  if (!telemetryEnabled()) return undefined;
  return tracer().startSpan(
    name,
    { kind: KINDS[options.kind ?? 'internal'], attributes: options.attributes, links: options.links && linksOf(options.links) },
    contextOf(options.parent),
  );
}
