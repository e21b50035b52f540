let started = false;

/**
 * Whether this process (this thread) started the SDK. Code on hot paths asks this before it builds spans,
 * attributes or headers, so that with telemetry off it costs the test of a boolean.
 */
export const telemetryEnabled = (): boolean => started;

export function markTelemetryStarted(_service: string): void {
  started = true;
}

/** For tests that register and drop a provider. */
export function markTelemetryStopped(): void {
  started = false;
}
