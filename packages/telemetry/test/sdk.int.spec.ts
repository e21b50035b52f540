import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { trace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTelemetry, withSpan } from '../src';

describe('startTelemetry', () => {
  const received: { path: string; body: Buffer }[] = [];
  let collector: Server;
  let endpoint: string;

  beforeAll(async () => {
    collector = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  });
  afterAll(() => new Promise<void>((resolve) => collector.close(() => resolve())));

  it('is a no-op without OTEL_EXPORTER_OTLP_ENDPOINT', async () => {
    const telemetry = await startTelemetry({ serviceName: 'billing', version: '1.2.3' });
    expect(trace.getTracer('oc').startSpan('nothing').isRecording()).toBe(false);
    await telemetry.shutdown();
  });

  it('exports spans to the OTLP endpoint with the service name and version, flushed on shutdown', async () => {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
    const telemetry = await startTelemetry({ serviceName: 'billing-it', version: '9.8.7' });
    await withSpan('billing.add_credits', { 'oc.org_id': 'org_42' }, () => undefined);
    await telemetry.shutdown();

    const traces = received.filter((r) => r.path === '/v1/traces').map((r) => r.body.toString('latin1'));
    expect(traces).toHaveLength(1);
    for (const text of ['billing-it', '9.8.7', 'billing.add_credits', 'org_42']) expect(traces[0]).toContain(text);
  });
});
