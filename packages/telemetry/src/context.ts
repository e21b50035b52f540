import { context, propagation, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';

export type TraceHeaders = Record<string, string>;

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

export async function withSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T> | T): Promise<T> {
  return trace.getTracer('oc').startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}
