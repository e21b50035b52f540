import { PROBE_PATHS } from '@oc/contracts';
import { startTelemetry } from '@oc/telemetry';
import pkg from '../package.json' with { type: 'json' };

/**
 * main.ts's first import: when OTEL_* configure an exporter, the SDK starts here, synchronously, before any
 * other module of the process is evaluated, with the HTTP server's instrumentation (probes untraced);
 * otherwise nothing is loaded or patched.
 */
export const telemetry = startTelemetry({
  service: 'gateway',
  version: pkg.version,
  httpServer: { ignorePaths: [PROBE_PATHS.liveness, PROBE_PATHS.readiness] },
});
