import { context, propagation, trace } from '@opentelemetry/api';
import { node } from '@opentelemetry/sdk-node';

/**
 * A real tracer provider, AsyncLocalStorage context manager and W3C propagator, taken from the
 * sdk-node re-exports because pnpm keeps sdk-trace-node out of this package's reach.
 */
export function registerTestTracing() {
  const exporter = new node.InMemorySpanExporter();
  const provider = new node.NodeTracerProvider({ spanProcessors: [new node.SimpleSpanProcessor(exporter)] });
  provider.register();
  return {
    exporter,
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
