import { SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { injectTraceHeaders, withExtractedContext, withSpan } from '../src';
import { registerTestTracing } from './tracing';

describe('trace propagation over non-HTTP hops', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  beforeAll(() => {
    tracing = registerTestTracing();
  });
  beforeEach(() => tracing.exporter.reset());
  afterAll(() => tracing.shutdown());

  it('injects nothing outside a span', () => {
    expect(injectTraceHeaders()).toEqual({});
  });

  it('carries the trace across a hop: the receiving span is a child of the sending span', async () => {
    const { headers, sender } = await withSpan('publish', { 'messaging.system': 'nats' }, () => ({
      headers: injectTraceHeaders(),
      sender: trace.getActiveSpan()!.spanContext(),
    }));
    expect(Object.keys(headers)).toEqual(['traceparent']);
    expect(headers.traceparent).toBe(`00-${sender.traceId}-${sender.spanId}-01`);

    await withExtractedContext(headers, () => withSpan('consume', {}, () => undefined));

    const consume = tracing.exporter.getFinishedSpans().find((s) => s.name === 'consume')!;
    expect(consume.spanContext().traceId).toBe(sender.traceId);
    expect(consume.parentSpanContext?.spanId).toBe(sender.spanId);
  });

  it('round-trips traceparent and tracestate with lower-case keys', () => {
    const incoming = {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'oc=t61rcWkgMzE',
    };
    expect(withExtractedContext(incoming, injectTraceHeaders)).toEqual(incoming);
  });

  it('ignores a malformed traceparent', () => {
    expect(withExtractedContext({ traceparent: 'garbage' }, injectTraceHeaders)).toEqual({});
  });

  it('withSpan sets attributes, records a failure and always ends the span', async () => {
    await expect(
      withSpan('reserve', { 'oc.org_id': 'org_1' }, async () => {
        throw new Error('insufficient funds');
      }),
    ).rejects.toThrow('insufficient funds');

    const [span] = tracing.exporter.getFinishedSpans();
    expect(span).toMatchObject({
      name: 'reserve',
      attributes: { 'oc.org_id': 'org_1' },
      status: { code: SpanStatusCode.ERROR, message: 'insufficient funds' },
    });
    expect(span!.events.map((e) => e.name)).toEqual(['exception']);
    expect(span!.instrumentationScope.name).toBe('oc');
  });
});
