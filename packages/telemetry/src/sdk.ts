import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { markTelemetryStarted } from './state';

export interface Telemetry {
  /** Whether the SDK runs in this process (an OTLP exporter is configured). */
  readonly enabled: boolean;
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  /** The process's service (`gateway`, `billing` …): `service.name` is `oc-<service>` unless OTEL_SERVICE_NAME says otherwise. */
  service: string;
  version: string;
  /** Trace the process's HTTP server (the gateway): incoming requests only, never the requests it sends. */
  httpServer?: { ignorePaths: readonly string[] };
  /**
   * `service.instance.id` when another thread of this process started the SDK first (its `telemetryInstanceId()`);
   * a new random UUID otherwise, so that each process, and each start of it, is an instance of its own.
   */
  instanceId?: string | undefined;
  env?: NodeJS.ProcessEnv;
}

/**
 * The standard OTEL_* variables our deployment files and docs use, each checked for its form at boot like every
 * other variable; the SDK itself reads them from the environment.
 */
const endpoint = () => z.url({ protocol: /^https?$/ });

export const TelemetryConfigSchema = z.object({
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_RESOURCE_ATTRIBUTES: z.string().optional().describe('comma-separated key=value pairs, e.g. deployment.environment.name=production'),
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint().optional().describe('the collector, e.g. http://otel-collector:4318'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint().optional(),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: endpoint().optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['grpc', 'http/protobuf', 'http/json']).optional(),
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  OTEL_TRACES_EXPORTER: z.string().optional(),
  OTEL_METRICS_EXPORTER: z.string().optional(),
  OTEL_TRACES_SAMPLER: z.string().optional(),
  OTEL_TRACES_SAMPLER_ARG: z.string().optional(),
  OTEL_METRIC_EXPORT_INTERVAL: z.coerce.number().int().positive().optional(),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce.number().int().nonnegative().optional(),
  OTEL_LOG_LEVEL: z.string().optional(),
});

const ENDPOINTS = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'];
const EXPORTERS = ['OTEL_TRACES_EXPORTER', 'OTEL_METRICS_EXPORTER'];

/** Telemetry is off unless an exporter is configured: an OTLP endpoint, or an exporter named other than `none`. */
export function telemetryConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  return ENDPOINTS.some((name) => !!env[name]) || EXPORTERS.some((name) => !!env[name] && env[name] !== 'none');
}

const DISABLED: Telemetry = { enabled: false, shutdown: async () => {} };

/**
 * Starts the OpenTelemetry SDK when OTEL_* configure an exporter, synchronously, so that a process's first
 * import can start it before any other module runs; otherwise nothing is loaded, patched or started. Exporters,
 * protocol, sampling and batching come from the standard variables; the resource carries `service.name`,
 * `service.version`, `service.instance.id` (replicas of a service, and each restart, told apart) and
 * `deployment.environment.name` (and its older name `deployment.environment`, which many backends still group
 * by), from OTEL_RESOURCE_ATTRIBUTES or else NODE_ENV.
 */
export function startTelemetry({ service, version, httpServer, instanceId = randomUUID(), env = process.env }: TelemetryOptions): Telemetry {
  if (!telemetryConfigured(env)) return DISABLED;
  // CommonJS packages loaded by require: synchronous, and only on this path.
  const require = createRequire(import.meta.url);
  const { NodeSDK, resources } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const instrumentations = [];
  if (httpServer) {
    // The stable HTTP conventions: `http.request.method`, `http.route`, `http.server.request.duration` (seconds).
    env.OTEL_SEMCONV_STABILITY_OPT_IN ??= 'http';
    const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
    const ignored = new Set(httpServer.ignorePaths);
    instrumentations.push(
      new HttpInstrumentation({
        // Outgoing requests (webhook deliveries, upstreams) get spans of our own, and no trace header goes to third parties.
        disableOutgoingRequestInstrumentation: true,
        ignoreIncomingRequestHook: (request) => ignored.has((request.url ?? '').split('?')[0]!),
      }),
    );
  }
  const environment = deploymentEnvironment(env);
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? `oc-${service}`,
    resource: resources.defaultResource().merge(
      resources.resourceFromAttributes({
        'service.namespace': 'oc',
        'service.version': version,
        'service.instance.id': instanceId,
        'deployment.environment.name': environment,
        'deployment.environment': environment,
      }),
    ),
    instrumentations,
    // Logs go to stdout through pino, with trace_id and span_id; no OTLP log pipeline.
    logRecordProcessors: [],
  });
  sdk.start();
  // The HTTP instrumentation patches `http` when it is next required: now, before any server listens.
  if (httpServer) require('node:http');
  markTelemetryStarted(service, instanceId);
  return { enabled: true, shutdown: () => sdk.shutdown() };
}

function deploymentEnvironment(env: NodeJS.ProcessEnv): string {
  for (const pair of (env.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const [key, value] = pair.split('=').map((part) => part.trim());
    if ((key === 'deployment.environment.name' || key === 'deployment.environment') && value) return decodeURIComponent(value);
  }
  return env.NODE_ENV ?? 'development';
}
