import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as the OTLP/JSON export carries it, with its resource's service name and instance, and plain attributes. */
export interface ReceivedSpan {
  service: string;
  /** The resource's `service.instance.id`: the process (and start) that exported the span. */
  instance: unknown;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
}

export interface ReceivedPoint {
  service: string;
  metric: string;
  attributes: Record<string, unknown>;
  point: Record<string, unknown>;
}

type OtlpValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: OtlpValue[] } };

const valueOf = (value: OtlpValue): unknown =>
  value.stringValue ??
  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
  value.doubleValue ??
  value.boolValue ??
  value.arrayValue?.values?.map(valueOf);

const attributesOf = (list: Array<{ key: string; value: OtlpValue }> = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

/**
 * The in-memory end of an OTLP exporter: an OTLP/HTTP receiver that keeps every span and metric point the
 * processes export (they are told `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), as a collector would receive them.
 */
export async function otlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
      for (const resource of body.resourceSpans ?? []) {
        const attributes = attributesOf(resource.resource?.attributes);
        const service = String(attributes['service.name']);
        for (const scope of resource.scopeSpans ?? []) {
          for (const s of scope.spans ?? []) {
            spans.push({
              service,
              instance: attributes['service.instance.id'],
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              kind: s.kind,
              attributes: attributesOf(s.attributes),
              status: s.status ?? {},
            });
          }
        }
      }
      for (const resource of body.resourceMetrics ?? []) {
        const service = String(attributesOf(resource.resource?.attributes)['service.name']);
        for (const scope of resource.scopeMetrics ?? []) {
          for (const m of scope.metrics ?? []) {
            const data = m.sum ?? m.histogram ?? m.gauge;
            for (const p of data?.dataPoints ?? []) points.push({ service, metric: m.name, attributes: attributesOf(p.attributes), point: p });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    points,
    /** Every span of one trace. */
    trace: (traceId: string) => spans.filter((s) => s.traceId === traceId),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
