/**
 * The bookkeeping every dialect parser shares, so the SGLang and vLLM parsers only decide what a
 * line means: which phase the current start has reached, and whether its crash was reported.
 */
import type { LogEvent, Phase, Progress } from './log-events.js';
import { isExceptionLine, isIndented, isTracebackHeader, shortReason } from './log-line-format.js';

const PHASE_ORDER: readonly Phase[] = [
  'launching',
  'loading_weights',
  'allocating_kv_cache',
  'capturing_cuda_graphs',
  'starting_http',
  'warming_up',
  'serving',
];

export function phaseRank(phase: Phase): number {
  return PHASE_ORDER.indexOf(phase);
}

/**
 * The phase of the current start. It only moves forward: several processes write one log (TP/DP
 * ranks, reference §2 "Logger prefix"), and with DP one scheduler may still print weight lines
 * while another captures CUDA graphs, which would otherwise make the phase flicker. A speculative
 * decoding draft model loads after the target's graphs were captured; that load stays in the later
 * phase.
 */
export class PhaseTracker {
  #current: Phase | null = null;
  #lastEvent = '';

  get current(): Phase | null {
    return this.#current;
  }

  /** A new process start: any phase may follow. */
  reset(): void {
    this.#current = null;
    this.#lastEvent = '';
  }

  /** The event for reaching `phase`; none when it would go backwards or repeats the last one. */
  advance(phase: Phase, progress: Progress | null = null, etaSeconds: number | null = null): LogEvent[] {
    if (this.#current !== null && phaseRank(phase) < phaseRank(this.#current)) return [];
    const key = `${phase} ${progress?.done}/${progress?.total} ${etaSeconds}`;
    if (key === this.#lastEvent) return [];
    this.#current = phase;
    this.#lastEvent = key;
    return [{ type: 'phase', phase, progress, etaSeconds }];
  }

  /** After the ready line nothing earlier belongs to this start. */
  markServing(): void {
    this.#current = 'serving';
    this.#lastEvent = '';
  }
}

export interface CrashTrackerOptions {
  /** A line that ends a traceback we are waiting for: the crash is reported with its head alone. */
  interrupts(line: string, message: string): boolean;
  /** A line that does not end the wait, e.g. another rank's `Scheduler hit an exception`. */
  continues?(line: string, message: string): boolean;
  /** The traceback's closing exception line; by default any `SomeError: message` shape. */
  endsTraceback?(line: string, message: string): boolean;
}

export interface TracebackStep {
  events: LogEvent[];
  /** The line was part of the traceback; the parser should not look at it again. */
  consumed: boolean;
}

/**
 * A crash prints several fatal-looking lines (the exception, `Received sigquit ...`, `Possible
 * solutions:` ..., reference §3 "What happens next"); the lifecycle wants one reason per crash, so
 * the first fatal wins until a new run starts. A head such as `Scheduler hit an exception:` is
 * followed by a traceback whose last line is the useful reason, so the head waits for it.
 */
export class CrashTracker {
  static readonly MAX_TRACEBACK_LINES = 400;
  readonly #options: CrashTrackerOptions;
  #reported = false;
  #pending: { head: string; lines: number } | null = null;

  constructor(options: CrashTrackerOptions) {
    this.#options = options;
  }

  get waiting(): boolean {
    return this.#pending !== null;
  }

  /** A fatal line with its own reason. */
  report(reason: string): LogEvent[] {
    const events = this.#flush();
    if (this.#reported) return events;
    this.#reported = true;
    return [{ type: 'fatal', reason: shortReason(reason) }];
  }

  /** A fatal head whose reason is the exception line that ends the traceback after it. */
  awaitTraceback(head: string): LogEvent[] {
    if (this.#reported || this.#pending !== null) return [];
    this.#pending = { head, lines: 0 };
    return [];
  }

  /** Feed every line while `waiting`; returns the fatal once the traceback ends. */
  continue(line: string, message: string): TracebackStep {
    const pending = this.#pending;
    if (pending === null) return { events: [], consumed: false };
    if (++pending.lines > CrashTracker.MAX_TRACEBACK_LINES) return { events: this.#flush(), consumed: false };
    if (isIndented(message) || isTracebackHeader(message) || this.#options.continues?.(line, message)) {
      return { events: [], consumed: true };
    }
    if (this.#options.endsTraceback?.(line, message) ?? isExceptionLine(message)) {
      this.#pending = null;
      return { events: this.report(`${pending.head}: ${message}`), consumed: true };
    }
    if (this.#options.interrupts(line, message)) return { events: this.#flush(), consumed: false };
    return { events: [], consumed: false };
  }

  /** A new run starts: a crash still waiting for its traceback belonged to the old one. */
  newRun(): LogEvent[] {
    const events = this.#flush();
    this.#reported = false;
    return events;
  }

  #flush(): LogEvent[] {
    const pending = this.#pending;
    if (pending === null) return [];
    this.#pending = null;
    return this.report(pending.head);
  }
}

/** A process start (`start`) begins a new run at `launching`; the ready line (`ready`) ends the start-up. */
export function runBoundary(crash: CrashTracker, phases: PhaseTracker, boundary: 'start' | 'ready'): LogEvent[] {
  const events: LogEvent[] = [...crash.newRun(), { type: boundary }];
  if (boundary === 'start') {
    phases.reset();
    events.push(...phases.advance('launching'));
  } else {
    phases.markServing();
  }
  return events;
}

export interface LogParserOptions {
  /** Extra fatal lines from the config (`health.fatal_patterns`), tested against the raw line. */
  fatalPatterns?: RegExp[];
}
