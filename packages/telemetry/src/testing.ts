import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { metrics as sdkMetrics, node } from '@opentelemetry/sdk-node';
import { markTelemetryStarted, markTelemetryStopped } from './state';

/**
 * A real tracer provider (AsyncLocalStorage context manager, W3C propagator) with an in-memory exporter, and a
 * meter provider read on demand, as a started SDK would register them; `telemetryEnabled()` is true until
 * `shutdown`. From the sdk-node re-exports, so no other SDK package is needed.
 */
export function registerTestTracing() {
  const exporter = new node.InMemorySpanExporter();
  const provider = new node.NodeTracerProvider({ spanProcessors: [new node.SimpleSpanProcessor(exporter)] });
  provider.register();
  const metricExporter = new sdkMetrics.InMemoryMetricExporter(sdkMetrics.AggregationTemporality.CUMULATIVE);
  const reader = new sdkMetrics.PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 });
  const meterProvider = new sdkMetrics.MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(meterProvider);
  markTelemetryStarted('test');
  return {
    exporter,
    spans: () => exporter.getFinishedSpans(),
    /** Every data point recorded so far, by instrument name. */
    async metrics(): Promise<Map<string, Array<{ attributes: Record<string, unknown>; value: unknown }>>> {
      const { resourceMetrics } = await reader.collect();
      const found = new Map<string, Array<{ attributes: Record<string, unknown>; value: unknown }>>();
      for (const scope of resourceMetrics.scopeMetrics) {
        for (const metric of scope.metrics) {
          found.set(metric.descriptor.name, metric.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value })));
        }
      }
      return found;
    },
    async shutdown() {
      markTelemetryStopped();
      await provider.shutdown();
      await meterProvider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
      metrics.disable();
    },
  };
}
