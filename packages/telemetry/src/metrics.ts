import { type Meter, metrics } from '@opentelemetry/api';
import { telemetryEnabled, telemetryStarts } from './state';

export type { Counter, Histogram, Meter } from '@opentelemetry/api';

/**
 * A set of instruments made on first use: instruments taken from the API before the SDK registered its meter
 * provider would stay no-ops for good. Callers ask `telemetryEnabled()` first, so with telemetry off neither
 * instruments nor attribute objects are made. Made again after another start (a test's new providers): the API
 * has no proxy for meters, so instruments stay bound to the provider they were made under.
 */
export function instruments<T>(make: (meter: Meter) => T): () => T {
  let made: T | undefined;
  let madeAt = -1;
  return () => {
    if (madeAt !== telemetryStarts()) {
      made = make(metrics.getMeter('oc'));
      madeAt = telemetryStarts();
    }
    return made!;
  };
}

export { telemetryEnabled };
