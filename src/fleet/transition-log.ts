/** One structured log line per lifecycle transition (pino); a backend that fails or turns unhealthy warns. */
import type { Logger } from 'pino';
import type { FleetRegistry } from './registry.js';

export function logTransitions(logger: Logger, registry: FleetRegistry): void {
  registry.on('transition', ({ backend, from, to, reason }) => {
    const level = to === 'failed' || to === 'unhealthy' ? 'warn' : 'info';
    logger[level](
      { event: 'transition', backend: backend.name, from, to, reason },
      `${backend.name}: ${from} -> ${to}${reason ? ` (${reason})` : ''}`,
    );
  });
}
