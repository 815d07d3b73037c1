/** The process logger (pino). Asynchronous destination: logging stays off the request path. */
import pino, { type Logger } from 'pino';
import type { Config } from './config/types.js';

/** `pretty`: one human-readable line per entry, for `fleetgate demo`; `color` paints its levels. */
export function createLogger(log: Config['log'], { pretty = false, color = false } = {}): Logger {
  if (pretty) {
    return pino({
      level: log.level,
      transport: {
        target: 'pino-pretty',
        options: { colorize: color, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname', singleLine: true },
      },
    });
  }
  const fd = log.destination === 'stdout' ? 1 : log.destination === 'stderr' ? 2 : undefined;
  const destination = pino.destination(
    fd !== undefined ? { fd, sync: false } : { dest: log.destination, sync: false, mkdir: true },
  );
  return pino({ level: log.level }, destination);
}
