import { startTelemetry } from '@oc/telemetry';
import pkg from '../package.json' with { type: 'json' };

/**
 * main.ts's first import: when OTEL_* configure an exporter, the SDK starts here, synchronously, before any
 * other module of the process is evaluated; otherwise nothing is loaded.
 */
export const telemetry = startTelemetry({ service: 'chat', version: pkg.version });
