import { startTelemetry } from '@oc/telemetry';
import { version } from './version';

/**
 * main.ts's first import: when OTEL_* configure an exporter, the SDK starts here, synchronously, before any
 * other module of the process is evaluated; otherwise nothing is loaded. The gateway's thread starts its own
 * (`gateway-telemetry.ts`), each thread having its own modules.
 */
export const telemetry = startTelemetry({ service: 'standalone', version });
