export type { Logger } from 'pino';
export { createLogger, REDACT_PATHS, type LoggerOptions } from './logger';
export { startTelemetry, type Telemetry, type TelemetryOptions } from './sdk';
export { injectTraceHeaders, withExtractedContext, withSpan, type TraceHeaders } from './context';
