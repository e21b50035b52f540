import { type Meter, metrics } from '@opentelemetry/api';
import { telemetryEnabled } from './state';

export type { Counter, Histogram, Meter } from '@opentelemetry/api';

/**
 * A set of instruments made on first use: instruments taken from the API before the SDK registered its meter
 * provider would stay no-ops for good. Callers ask `telemetryEnabled()` first, so with telemetry off neither
 * instruments nor attribute objects are made.
 */
export function instruments<T>(make: (meter: Meter) => T): () => T {
  let made: T | undefined;
  return () => (made ??= make(metrics.getMeter('oc')));
}

export { telemetryEnabled };
