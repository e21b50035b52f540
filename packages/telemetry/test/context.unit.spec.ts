import { context, INVALID_SPAN_CONTEXT, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { core } from '@opentelemetry/sdk-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { activeTrace, injectTraceHeaders, inSpan, setHttpRoute, telemetryEnabled, withExtractedContext, withSpan, withTraceHeaders } from '../src';
import { registerTestTracing } from '../src/testing';

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

describe('tracing helpers', () => {
  it('run the work alone, with no span, while telemetry is off', async () => {
    expect(telemetryEnabled()).toBe(false);
    const seen = await inSpan('nothing', { kind: 'client' }, async (span) => span);
    expect(seen).toBeUndefined();
    expect(activeTrace()).toBeUndefined();
    expect(() => setHttpRoute('/v1/videos')).not.toThrow();
  });

  describe('with telemetry on', () => {
    let tracing: ReturnType<typeof registerTestTracing>;
    beforeAll(() => {
      tracing = registerTestTracing();
    });
    beforeEach(() => tracing.exporter.reset());
    afterAll(() => tracing.shutdown());

    it('continue a stored traceparent: the span is its child, and links name the other traces', async () => {
      const stored = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const other = '00-11111111111111111111111111111111-2222222222222222-01';
      const inside = await inSpan('video.job', { parent: stored, links: [other, other, undefined], attributes: { 'oc.video_id': 'video_1' } }, async () => activeTrace());
      const [span] = tracing.spans();
      expect(span!.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
      expect(span!.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
      expect(span!.links.map((l) => l.context.traceId)).toEqual(['11111111111111111111111111111111']);
      expect(inside).toEqual({
        traceparent: `00-0af7651916cd43dd8448eb211c80319c-${span!.spanContext().spanId}-01`,
        traceId: '0af7651916cd43dd8448eb211c80319c',
        spanId: span!.spanContext().spanId,
      });
    });

    it('record a failure on the span and rethrow it', async () => {
      await expect(inSpan('billing.reserve', { kind: 'server' }, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
      expect(tracing.spans()[0]).toMatchObject({ kind: SpanKind.SERVER, status: { code: SpanStatusCode.ERROR, message: 'boom' } });
    });

    it('withTraceHeaders adds the active traceparent to a copy of the headers', async () => {
      const given = { 'x-other': '1' };
      const headers = await inSpan('send', {}, async () => withTraceHeaders(given));
      expect(given).toEqual({ 'x-other': '1' });
      expect(headers).toEqual({ 'x-other': '1', traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/) });
    });

    it("names the route on the HTTP instrumentation's RPC metadata (the record @opentelemetry/core keeps)", () => {
      const metadata = { type: core.RPCType.HTTP, span: trace.wrapSpanContext(INVALID_SPAN_CONTEXT) } as { type: core.RPCType.HTTP; span: never; route?: string };
      context.with(core.setRPCMetadata(context.active(), metadata), () => setHttpRoute('/v1/videos/:video_id'));
      expect(metadata.route).toBe('/v1/videos/:video_id');
      expect(core.getRPCMetadata(core.setRPCMetadata(ROOT_CONTEXT, metadata))?.route).toBe('/v1/videos/:video_id');
    });
  });
});
