/**
 * The tracer, or null while tracing is off. The OpenTelemetry SDK and its exporters are loaded only
 * when tracing is on: a fleetgate without it neither loads nor holds them.
 */
import type { TracingConfig } from '../config/types.js';
import type { Tracing } from './tracing.js';

export async function createTracing(config: TracingConfig): Promise<Tracing | null> {
  const endpoint = config.otlp_endpoint;
  if (endpoint === null) return null;
  const { Tracing } = await import('./tracing.js');
  return new Tracing({ ...config, otlp_endpoint: endpoint });
}
