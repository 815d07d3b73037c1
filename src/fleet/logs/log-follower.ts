/**
 * Follows each backend's log: watcher → parser → registry. A replaced or truncated file starts a
 * fresh parser (the new process's lines); the ready line triggers an immediate probe so a backend
 * is admitted within about a second of becoming ready.
 */
import type { Config } from '../../config/types.js';
import type { Backend, FleetRegistry } from '../registry.js';
import type { LogEvent } from './log-events.js';
import { createLogParser } from './log-parser.js';
import { LogWatcher } from './log-watcher.js';

export interface LogFollowerOptions {
  registry: FleetRegistry;
  fatalPatterns: Config['health']['fatal_patterns'];
  /** Called when the log says the server is up (ready line). */
  onReadyLine: (backend: Backend) => void;
  pollMs?: number;
}

export class LogFollowers {
  readonly #opts: LogFollowerOptions;
  readonly #watchers = new Map<Backend, LogWatcher>();
  #started = false;

  constructor(opts: LogFollowerOptions) {
    this.#opts = opts;
    opts.registry.on('added', (backend) => {
      if (this.#started) this.#add(backend);
    });
    opts.registry.on('removed', (backend) => this.#remove(backend));
  }

  start(): void {
    this.#started = true;
    for (const backend of this.#opts.registry.list()) this.#add(backend);
  }

  stop(): void {
    this.#started = false;
    for (const backend of [...this.#watchers.keys()]) this.#remove(backend);
  }

  #add(backend: Backend): void {
    const path = backend.config.log;
    if (path === null || this.#watchers.has(backend)) return;
    const { registry, fatalPatterns, onReadyLine } = this.#opts;
    const newParser = () => createLogParser(backend.config.kind, fatalPatterns);
    let parser = newParser();
    const watcher = new LogWatcher(path, { pollMs: this.#opts.pollMs });
    watcher.on('reset', () => {
      parser = newParser();
    });
    watcher.on('lines', (lines: string[]) => {
      for (const event of withRefinedFatals(lines.flatMap((line) => parser.push(line)))) {
        registry.apply(backend, { type: 'log', event });
        if (event.type === 'ready') onReadyLine(backend);
      }
      const last = lines.at(-1);
      if (last !== undefined) registry.apply(backend, { type: 'log_line', line: last });
    });
    this.#watchers.set(backend, watcher);
    watcher.start();
  }

  #remove(backend: Backend): void {
    this.#watchers.get(backend)?.stop();
    this.#watchers.delete(backend);
  }
}

/**
 * A crash head and its traceback's exception line usually arrive in one read: the backend then
 * fails with the exception line as its reason at once, so the transition (and its log line) names
 * the error. An exception line read later still refines the reason (`fatal_reason`).
 */
export function withRefinedFatals(events: readonly LogEvent[]): LogEvent[] {
  const merged: LogEvent[] = [];
  let fatalAt = -1;
  for (const event of events) {
    if (event.type === 'fatal_reason' && fatalAt >= 0) {
      merged[fatalAt] = { type: 'fatal', reason: event.reason };
      continue;
    }
    if (event.type === 'fatal') fatalAt = merged.length;
    merged.push(event);
  }
  return merged;
}
