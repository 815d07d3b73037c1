/** What a backend's log tells the lifecycle. Produced by the pure log parsers. */

export type Phase =
  | 'launching'
  | 'loading_weights'
  | 'allocating_kv_cache'
  | 'capturing_cuda_graphs'
  | 'starting_http'
  | 'warming_up'
  | 'serving';

export interface Progress {
  done: number;
  total: number;
}

export type LogEvent =
  /** A line that only appears at the very beginning of a process start (e.g. `server_args=`). */
  | { type: 'start' }
  | { type: 'phase'; phase: Phase; progress: Progress | null; etaSeconds: number | null }
  /** `The server is fired up and ready to roll!` (SGLang) / `Application startup complete.` (vLLM). */
  | { type: 'ready' }
  | { type: 'fatal'; reason: string }
  /**
   * A better reason for the fatal already reported: the exception line that closes the traceback
   * after a crash head (`Scheduler hit an exception:`), which was reported with the head alone.
   */
  | { type: 'fatal_reason'; reason: string }
  /**
   * Before the ready line: a start-up failure suspect, the final exception of a traceback or a line
   * the runbook's grep (`Not enough memory|RuntimeError|ValueError`) matches. It replaces the
   * previous suspect; start-up progress (a phase, the ready line, a new start) clears it. The
   * lifecycle fails the backend with it when the process exits, its port goes down, or no progress
   * follows within `health.failure_quiet`.
   */
  | { type: 'suspect'; reason: string };

export interface LogParser {
  /** Feed one complete line (no `\n`/`\r`); returns the events it implies, in order. */
  push(line: string): LogEvent[];
}
