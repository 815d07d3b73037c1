/** Structured logs: one JSON line per proxied request and one per lifecycle transition (pino). */
import type { Logger } from 'pino';
import type { FleetRegistry } from '../fleet/registry.js';
import type { ProxyEventBus } from './proxy-events.js';

export function attachAccessLog(logger: Logger, registry: FleetRegistry, events: ProxyEventBus, access: boolean): void {
  registry.on('transition', ({ backend, from, to, reason }) => {
    const level = to === 'failed' || to === 'unhealthy' ? 'warn' : 'info';
    logger[level](
      { event: 'transition', backend: backend.name, from, to, reason },
      `${backend.name}: ${from} -> ${to}${reason ? ` (${reason})` : ''}`,
    );
  });
  if (!access) return;
  const log = logger.child({ event: 'access' });
  events.on('request', (record) => {
    log.info({
      backend: record.backend,
      method: record.method,
      path: record.path,
      status: record.status,
      duration_ms: Math.round(record.durationMs * 100) / 100,
      ttfb_ms: record.ttfbMs === null ? null : Math.round(record.ttfbMs * 100) / 100,
      bytes: record.bytes,
      retried: record.retries,
      outcome: record.outcome,
    });
  });
}
