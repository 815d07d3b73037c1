/**
 * The access log: one structured line per proxied request (pino), with its backend, retries, stream
 * resumes and the completion tokens the client got.
 */
import type { Logger } from 'pino';
import type { ProxyEventBus } from './proxy-events.js';

export function attachAccessLog(logger: Logger, events: ProxyEventBus): void {
  const log = logger.child({ event: 'access' });
  events.on('request', (record) => {
    log.info({
      backend: record.backend,
      method: record.method,
      path: record.path,
      status: record.status,
      class: record.priorityClass,
      duration_ms: Math.round(record.durationMs * 100) / 100,
      ttfb_ms: record.ttfbMs === null ? null : Math.round(record.ttfbMs * 100) / 100,
      queue_ms: record.queueMs === null ? null : Math.round(record.queueMs * 100) / 100,
      bytes: record.bytes,
      completion_tokens: record.completionTokens,
      retried: record.retries,
      resumed: record.resumes,
      ...(record.resumes > 0 ? { backends: record.backends } : {}),
      outcome: record.outcome,
    });
  });
}
