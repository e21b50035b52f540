import { PROBE_PATHS } from '@oc/contracts';
import { startTelemetry } from '@oc/telemetry';
import { version } from './version';

/**
 * gateway-thread.ts's first import: the thread's own SDK (when OTEL_* configure one), with the HTTP server's
 * instrumentation, probes untraced.
 */
export const telemetry = startTelemetry({
  service: 'standalone',
  version,
  httpServer: { ignorePaths: [PROBE_PATHS.liveness, PROBE_PATHS.readiness] },
});
