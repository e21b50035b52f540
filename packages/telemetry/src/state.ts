let started = false;
let instanceId: string | undefined;
/** Counts the starts: instruments made under an earlier provider (a test's, since dropped) are made again. */
let starts = 0;

/**
 * Whether this process (this thread) started the SDK. Code on hot paths asks this before it builds spans,
 * attributes or headers, so that with telemetry off it costs the test of a boolean.
 */
export const telemetryEnabled = (): boolean => started;

export function markTelemetryStarted(_service: string, instance?: string): void {
  started = true;
  instanceId = instance;
  starts++;
}

/** Which start of the SDK (or of a test's providers) this is: 0 before any. */
export const telemetryStarts = (): number => starts;

/**
 * The `service.instance.id` this thread's SDK exports under, when it started one: another thread of the process
 * (the standalone's gateway) starts its own SDK and takes it, so that the process is one instance, not two.
 */
export const telemetryInstanceId = (): string | undefined => instanceId;

/** For tests that register and drop a provider. */
export function markTelemetryStopped(): void {
  started = false;
  instanceId = undefined;
}
