import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger } from 'pino';

/** Ours (API keys, webhook secrets) and the providers' (an adapter's `apiKey`, the variables that hold them). */
const SECRET_FIELDS = [
  'authorization',
  'key',
  'secret',
  'api_key',
  'key_hash',
  'apiKey',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'GEMINI_API_KEY',
  'FAL_KEY',
  'REPLICATE_API_TOKEN',
  'CHAT_UPSTREAM_API_KEY',
  'VIDEO_UPSTREAM_API_KEY',
];

/**
 * API keys and webhook secrets must never reach a log line. pino's `*.x` only matches one level
 * down, so the top-level names are listed as well.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  ...SECRET_FIELDS,
  ...SECRET_FIELDS.map((field) => `*.${field}`),
];

export interface LoggerOptions {
  service: string;
  level?: string;
}

export function createLogger({ service, level = 'info' }: LoggerOptions, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      mixin() {
        const span = trace.getActiveSpan()?.spanContext();
        return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
      },
    },
    destination,
  );
}
