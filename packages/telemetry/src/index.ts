export type { Logger } from 'pino';
export { createLogger, REDACT_PATHS, type LoggerOptions } from './logger';
export { startTelemetry, telemetryConfigured, TelemetryConfigSchema, type Telemetry, type TelemetryOptions } from './sdk';
export { telemetryEnabled, telemetryInstanceId } from './state';
export { instruments, type Counter, type Histogram, type Meter } from './metrics';
export {
  activeTrace,
  failSpan,
  injectTraceHeaders,
  inSpan,
  markSpanError,
  setActiveSpanAttributes,
  setHttpRoute,
  startSpan,
  withExtractedContext,
  withSpan,
  withTraceHeaders,
  type Attributes,
  type Kind,
  type Span,
  type SpanOptions,
  type TraceHeaders,
} from './context';
