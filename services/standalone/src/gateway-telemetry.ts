import { workerData } from 'node:worker_threads';
import { PROBE_PATHS } from '@oc/contracts';
import { startTelemetry } from '@oc/telemetry';
import type { GatewayThreadData } from './gateway-thread';
import { version } from './version';

/**
 * gateway-thread.ts's first import: the thread's own SDK (when OTEL_* configure one), with the HTTP server's
 * instrumentation, probes untraced, exporting as the same instance as the process's main thread.
 */
export const telemetry = startTelemetry({
  service: 'standalone',
  version,
  instanceId: (workerData as GatewayThreadData).serviceInstanceId,
  httpServer: { ignorePaths: [PROBE_PATHS.liveness, PROBE_PATHS.readiness] },
});
