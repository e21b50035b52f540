import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TelemetryConfigSchema, telemetryConfigured } from '../src';

const FIXTURE = join(import.meta.dirname, 'fixtures/traced-process.ts');

/** An OTLP/HTTP collector that keeps what it receives (JSON, as OTEL_EXPORTER_OTLP_PROTOCOL=http/json sends it). */
function collector() {
  const received: Array<{ path: string; body: any }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', body: JSON.parse(Buffer.concat(chunks).toString() || '{}') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { server, received };
}

async function run(env: Record<string, string>, ...args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  const [code] = await once(child, 'exit');
  expect(code).toBe(0);
  return JSON.parse(out.split('\n')[0]!) as { enabled: boolean; sdkLoaded: boolean; patched: boolean };
}

const attributes = (list: Array<{ key: string; value: Record<string, unknown> }>) =>
  Object.fromEntries(list.map(({ key, value }) => [key, Object.values(value)[0]]));

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('startTelemetry', () => {
  const otlp = collector();
  let endpoint: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => otlp.server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(otlp.server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    otlp.received.length = 0;
  });
  afterAll(() => new Promise<void>((resolve) => (otlp.server as Server).close(() => resolve())));

  it('is off unless an exporter is configured', () => {
    expect(telemetryConfigured({})).toBe(false);
    expect(telemetryConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(true);
    expect(telemetryConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(true);
    expect(telemetryConfigured({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(telemetryConfigured({ OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(telemetryConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });

  it('checks the form of the OTEL_* variables like any other', () => {
    expect(TelemetryConfigSchema.safeParse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }).success).toBe(false);
    expect(TelemetryConfigSchema.safeParse({ OTEL_EXPORTER_OTLP_PROTOCOL: 'udp' }).success).toBe(false);
    expect(TelemetryConfigSchema.safeParse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).success).toBe(true);
  });

  it('without configuration loads no SDK and patches nothing', async () => {
    expect(await run({})).toEqual({ enabled: false, sdkLoaded: false, patched: false });
  });

  it('exports the HTTP server span named by its route, with the resource, and the request duration metric', async () => {
    const report = await run(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging',
      },
      'serve',
    );
    expect(report).toEqual({ enabled: true, sdkLoaded: true, patched: true });

    const traces = otlp.received.filter((r) => r.path === '/v1/traces').flatMap((r) => r.body.resourceSpans);
    expect(attributes(traces[0].resource.attributes)).toMatchObject({
      'service.name': 'oc-fixture',
      'service.version': '9.8.7',
      'service.namespace': 'oc',
      'service.instance.id': expect.stringMatching(UUID),
      'deployment.environment.name': 'staging',
      'deployment.environment': 'staging',
    });
    const spans = traces.flatMap((r: any) => r.scopeSpans.flatMap((s: any) => s.spans));
    const server = spans.find((s: any) => s.kind === 2);
    // The probe made no span; the request's span has its route, and the work inside it is its child.
    expect(spans.filter((s: any) => s.kind === 2)).toHaveLength(1);
    expect(server.name).toBe('GET /v1/videos/:video_id');
    expect(attributes(server.attributes)).toMatchObject({ 'http.route': '/v1/videos/:video_id', 'http.response.status_code': 404, 'http.request.method': 'GET' });
    expect(spans.find((s: any) => s.name === 'inside' && s.parentSpanId === server.spanId)).toBeDefined();

    const metrics = otlp.received.filter((r) => r.path === '/v1/metrics').flatMap((r) => r.body.resourceMetrics);
    const duration = metrics.flatMap((m: any) => m.scopeMetrics.flatMap((s: any) => s.metrics)).find((m: any) => m.name === 'http.server.request.duration');
    expect(duration.histogram.dataPoints.map((p: any) => attributes(p.attributes))).toEqual([
      expect.objectContaining({ 'http.route': '/v1/videos/:video_id', 'http.response.status_code': 404 }),
    ]);
  });

  it('names each process an instance of its own (service.instance.id), in its traces and its metrics alike', async () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
    await run(env, 'serve');
    await run(env, 'serve');
    const instances = (path: string, key: string) =>
      otlp.received.filter((r) => r.path === path).flatMap((r) => r.body[key].map((resource: any) => attributes(resource.resource.attributes)['service.instance.id']));
    const traced = instances('/v1/traces', 'resourceSpans');
    const measured = instances('/v1/metrics', 'resourceMetrics');
    // Two processes, two instances: each process's spans and metric points under its one id.
    expect(new Set(traced).size).toBe(2);
    expect(new Set(measured)).toEqual(new Set(traced));
    for (const id of traced) expect(id).toMatch(UUID);
  });
});
