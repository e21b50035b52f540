import { PROBE_PATHS } from '@oc/contracts';
import { startTelemetry } from '@oc/telemetry';
import { version } from './version';

const service = 'standalone';

/**
 * main.ts's first import: when OTEL_* configure an exporter, the SDK starts here, synchronously, before any
 * other module of the process is evaluated; otherwise nothing is loaded. The gateway's thread starts its own
 * (`gatewayThreadTelemetry`), each thread having its own modules.
 */
export const telemetry = startTelemetry({ service, version });

export const gatewayThreadTelemetry = () =>
  startTelemetry({ service, version, httpServer: { ignorePaths: [PROBE_PATHS.liveness, PROBE_PATHS.readiness] } });
