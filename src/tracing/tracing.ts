/**
 * fleetgate's OpenTelemetry tracer (docs/operations.md, "Traces"): the JS SDK's tracer provider with
 * a parent-based ratio sampler, a batch span processor and the OTLP/HTTP exporter (protobuf or
 * JSON), built only when `tracing.otlp_endpoint` is set (create-tracing.ts loads this module then). No global provider or context manager:
 * each span's parent context is handed on explicitly. The W3C `traceparent`/`tracestate` headers
 * are read with @opentelemetry/core's propagator and written from the span's context (`headersOf`).
 */
import {
  type Attributes,
  type Context,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  type Span,
  type SpanKind,
  type TimeInput,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracingConfig } from '../config/types.js';

/**
 * Spans per export, below the SDK's 512: an ended span waits in the processor's queue until its
 * batch is full, and at a few hundred traced requests a second a batch of 512 holds its spans long
 * enough for the garbage collector to move them to the old generation, which costs more per request
 * than the extra exports of smaller batches (docs/benchmarks.md, issue #41). The queue stays the
 * SDK's (2048 spans, then dropped), exports one batch at a time, and the 5 s delay still sends
 * an unfilled batch.
 */
const EXPORT_BATCH_SIZE = 64;
/** The processor's queue of ended spans (the SDK's default, spelled out for the limit below). */
const QUEUE_SIZE = 2048;
/**
 * Exports in flight at once: a flush (at shutdown) exports the whole queue at once, one export per
 * batch, next to the one already sent. The exporter's default of 30 is below the 32 batches of a
 * full queue, so a shutdown under load lost the last batches and failed.
 */
const CONCURRENT_EXPORTS = QUEUE_SIZE / EXPORT_BATCH_SIZE + 1;

export interface SpanStart {
  kind: SpanKind;
  attributes?: Attributes;
  /** A performance.now() or epoch-ms time; now when absent. */
  startTime?: TimeInput;
}

export class Tracing {
  readonly #provider: BasicTracerProvider;
  readonly #tracer: Tracer;
  readonly #propagator = new W3CTraceContextPropagator();

  /** `exporter` replaces the OTLP one the config names (bench/overhead/tracing-parts-run.ts weighs the parts). */
  constructor(config: TracingConfig & { otlp_endpoint: string }, exporter: SpanExporter = otlpExporter(config)) {
    this.#provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.service_name }),
      sampler: new ParentBasedSampler({
        root: config.sample_ratio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(config.sample_ratio),
      }),
      spanProcessors: [
        new BatchSpanProcessor(exporter, { maxExportBatchSize: EXPORT_BATCH_SIZE, maxQueueSize: QUEUE_SIZE }),
      ],
    });
    this.#tracer = this.#provider.getTracer('fleetgate');
  }

  /** The context an incoming request's `traceparent`/`tracestate` continue; the root one without them. */
  extract(headers: Record<string, string | string[] | undefined>): Context {
    return this.#propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  }

  /**
   * Starts a span under `parent` (a context, or a span; null: a new trace). Its attributes are set
   * once the sampler has decided, on a span it records only: the SDK checks attributes handed to
   * `startSpan` before sampling, even for a span it leaves out, and twice more for one it records.
   * None of fleetgate's samplers reads them.
   */
  start(name: string, parent: Context | Span | null, { kind, startTime, attributes }: SpanStart): Span {
    const context = parent === null ? ROOT_CONTEXT : 'spanContext' in parent ? this.contextOf(parent) : parent;
    const span = this.#tracer.startSpan(name, { kind, startTime }, context);
    if (attributes !== undefined && span.isRecording()) span.setAttributes(attributes);
    return span;
  }

  /** The context whose spans are children of `span` (a span with several children makes it once). */
  contextOf(span: Span): Context {
    return trace.setSpan(ROOT_CONTEXT, span);
  }

  /**
   * The `traceparent` (and `tracestate`) that make `span` the parent of what receives them: W3C's
   * format, written as the propagator's `inject` writes it for a span of this tracer (always valid),
   * without the context that `inject` reads it from.
   */
  headersOf(span: Span): Record<string, string> {
    const { traceId, spanId, traceFlags, traceState } = span.spanContext();
    const sampled = (traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
    const headers: Record<string, string> = { traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` };
    if (traceState !== undefined) headers.tracestate = traceState.serialize();
    return headers;
  }

  /** Exports what is pending. */
  flush(): Promise<void> {
    return this.#provider.forceFlush();
  }

  /** Exports what is pending and stops. */
  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }
}

function otlpExporter(config: TracingConfig & { otlp_endpoint: string }): SpanExporter {
  const options = { url: tracesUrl(config.otlp_endpoint), concurrencyLimit: CONCURRENT_EXPORTS };
  return config.otlp_protocol === 'http/json' ? new JsonExporter(options) : new ProtobufExporter(options);
}

/** `otlp_endpoint` as the exporter's URL: a base URL gets OTLP's `/v1/traces`. */
function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/v1/traces';
  return url.toString();
}
