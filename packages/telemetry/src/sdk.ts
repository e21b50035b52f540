export interface Telemetry {
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  serviceName: string;
  version: string;
}

/**
 * Starts the OpenTelemetry SDK only when an OTLP endpoint is configured, so local runs and tests
 * export nothing, and do not spend start-up time loading it. Exporters, protocol and sampling come
 * from the standard OTEL_* variables.
 */
export async function startTelemetry({ serviceName, version }: TelemetryOptions): Promise<Telemetry> {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT) return { shutdown: async () => {} };
  const { NodeSDK, resources } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({
    serviceName,
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.version': version })),
  });
  sdk.start();
  return { shutdown: () => sdk.shutdown() };
}
