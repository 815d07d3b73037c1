/**
 * A Batch API job's spans (docs/operations.md, "Traces"), while tracing is on: one span per job and
 * under it one client span per request sent, whose `traceparent` the request carries to fleetgate's
 * own listener, so the proxied request's spans join the job's trace.
 */
import { type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_URL_PATH } from '@opentelemetry/semantic-conventions';
import { GEN_AI } from '../tracing/gen-ai-attributes.js';
import type { Tracing } from '../tracing/tracing.js';
import type { Send } from './batch-sender.js';
import type { BatchObject } from './batch-store.js';

export function startJobSpan(tracing: Tracing, batch: BatchObject): Span {
  return tracing.start('fleetgate.batch', null, {
    kind: SpanKind.INTERNAL,
    attributes: { 'fleetgate.batch.id': batch.id, 'fleetgate.batch.endpoint': batch.endpoint },
  });
}

export function endJobSpan(span: Span, batch: BatchObject): void {
  const counts = batch.request_counts;
  span.setAttributes({
    'fleetgate.batch.status': batch.status,
    'fleetgate.batch.requests.total': counts.total,
    'fleetgate.batch.requests.completed': counts.completed,
    'fleetgate.batch.requests.failed': counts.failed,
  });
  if (batch.status === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** `send`, each request in a span of its own under the job's. */
export function tracedSend(tracing: Tracing, job: Span, send: Send): Send {
  return async (request, signal, headers) => {
    const span = tracing.start('fleetgate.batch.request', job, {
      kind: SpanKind.CLIENT,
      attributes: { 'fleetgate.batch.custom_id': request.custom_id, [ATTR_URL_PATH]: request.url },
    });
    try {
      const outcome = await send(request, signal, { ...headers, ...tracing.headersOf(span) });
      span.setAttribute('fleetgate.outcome', outcome.kind);
      if (outcome.kind !== 'not_sent' && outcome.status !== null)
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.status);
      if (outcome.kind === 'answer' && outcome.tokens > 0) span.setAttribute(GEN_AI.outputTokens, outcome.tokens);
      if (outcome.kind !== 'answer') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.kind });
      return outcome;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  };
}
