/**
 * The bookkeeping every dialect parser shares, so the SGLang and vLLM parsers only decide what a
 * line means: which phase the current start has reached, and whether its crash was reported.
 */
import type { LogEvent, Phase, Progress } from './log-events.js';
import { isExceptionLine, isIndented, isTracebackHeader, shortReason } from './log-line-format.js';
import { type LogLine, type TracebackException, TracebackReader } from './traceback-reader.js';

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
 * ranks, docs/sglang-vllm-behaviour.md §2 "Logger prefix"), and with DP one scheduler may still print
 * weight lines while another captures CUDA graphs, which would otherwise make the phase flicker. A speculative
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
  /** A line that ends the traceback being read: no closing exception line will refine the reason. */
  interrupts(line: string, message: string): boolean;
  /** A line that does not end the traceback, e.g. another rank's `Scheduler hit an exception`. */
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
 * solutions:` ..., docs/sglang-vllm-behaviour.md §3 "What happens next"); the lifecycle wants one crash per
 * run, so the first fatal wins until a new run starts.
 *
 * A head such as `Scheduler hit an exception:` is fatal when it arrives: the traceback after it may
 * be cut, end in a frame, or never be flushed, and waiting for it kept dead backends in rotation.
 * If the traceback's closing exception line does follow, it refines the reason (`fatal_reason`).
 */
export class CrashTracker {
  static readonly MAX_TRACEBACK_LINES = 400;
  readonly #options: CrashTrackerOptions;
  #reported = false;
  /** The reported head whose traceback is being read for its closing exception line. */
  #traceback: { head: string; lines: number } | null = null;

  constructor(options: CrashTrackerOptions) {
    this.#options = options;
  }

  /** A fatal was reported in this run: nothing later can change the verdict. */
  get reported(): boolean {
    return this.#reported;
  }

  /** A fatal line with its own reason. */
  report(reason: string): LogEvent[] {
    this.#traceback = null;
    if (this.#reported) return [];
    this.#reported = true;
    return [{ type: 'fatal', reason: shortReason(reason) }];
  }

  /** A fatal head: reported at once; the exception line that ends its traceback may refine it. */
  reportHead(head: string): LogEvent[] {
    if (this.#reported) return [];
    const events = this.report(head);
    this.#traceback = { head, lines: 0 };
    return events;
  }

  /** Feed every line first: a traceback's lines are consumed, its closing line refines the reason. */
  continue(line: string, message: string): TracebackStep {
    const traceback = this.#traceback;
    if (traceback === null) return { events: [], consumed: false };
    if (++traceback.lines > CrashTracker.MAX_TRACEBACK_LINES) {
      this.#traceback = null;
      return { events: [], consumed: false };
    }
    if (isIndented(message) || isTracebackHeader(message) || this.#options.continues?.(line, message)) {
      return { events: [], consumed: true };
    }
    if (this.#options.endsTraceback?.(line, message) ?? isExceptionLine(message)) {
      this.#traceback = null;
      return {
        events: [{ type: 'fatal_reason', reason: shortReason(`${traceback.head}: ${message}`) }],
        consumed: true,
      };
    }
    if (this.#options.interrupts(line, message)) this.#traceback = null;
    return { events: [], consumed: false };
  }

  /** A new run starts: the next fatal is its own. */
  newRun(): void {
    this.#reported = false;
    this.#traceback = null;
  }
}

/** A process start (`start`) begins a new run at `launching`; the ready line (`ready`) ends the start-up. */
export function runBoundary(crash: CrashTracker, phases: PhaseTracker, boundary: 'start' | 'ready'): LogEvent[] {
  crash.newRun();
  const events: LogEvent[] = [{ type: boundary }];
  if (boundary === 'start') {
    phases.reset();
    events.push(...phases.advance('launching'));
  } else {
    phases.markServing();
  }
  return events;
}

/** The runbook's wait loop ends with `grep -E "Not enough memory|RuntimeError|ValueError"`: a floor. */
export const RUNBOOK_GREP = /Not enough memory|RuntimeError|ValueError/;
/** The grep, with a cheap test first: most lines name no error at all. */
function mayMatchGrep(message: string): boolean {
  return (message.includes('Error') || message.includes('Not enough memory')) && RUNBOOK_GREP.test(message);
}

/** `UserWarning: ...`, `DeprecationWarning`, a `WARNING` record, `warnings.warn(`: not a failure. */
const WARNING = /Warning\b|warnings\.warn|\bWARN(ING)?\b/;

/**
 * Start-up failure suspects (`suspect` events), from the shared traceback reader and the runbook's
 * grep. Across tracebacks the first root cause wins (a worker's OOM, not the API server's
 * `Engine core initialization failed` that follows); within a chain the last link does; a
 * traceback's exception replaces a grep line. Progress clears it; after the ready line there are
 * none (a serving process's `ValueError` is one request's).
 */
export class SuspectTracker {
  #reader = new TracebackReader();
  #reason: string | null = null;
  #fromTraceback = false;
  #tag = '';

  /**
   * Feed every line of a start, split, until it is settled (the ready line, runtime lines or a fatal
   * were seen: no suspect can matter until the next start, so a busy serving log costs nothing here).
   */
  read(line: LogLine): LogEvent[] {
    const thrown = this.#reader.push(line);
    if (thrown !== null) return this.#fromException(thrown);
    if (this.#reason !== null || this.#reader.partOfTraceback) return [];
    const message = line.message;
    if (!mayMatchGrep(message) || isIndented(message) || line.level === 'WARNING' || WARNING.test(message)) {
      return [];
    }
    return this.#set(message, false, line.tag);
  }

  /** Start-up went on (a phase, the ready line, a new start): the suspect was recovered from. */
  clear(): void {
    this.#reason = null;
    this.#fromTraceback = false;
  }

  /** A new process start: nothing of the previous one's tracebacks carries over. */
  reset(): void {
    this.clear();
    this.#reader = new TracebackReader();
  }

  #fromException(thrown: TracebackException): LogEvent[] {
    if (thrown.handled) return [];
    const laterLink = thrown.chained && thrown.tag === this.#tag;
    if (this.#fromTraceback && !laterLink) return [];
    return this.#set(thrown.text, true, thrown.tag);
  }

  #set(text: string, fromTraceback: boolean, tag: string): LogEvent[] {
    const reason = shortReason(text);
    this.#fromTraceback = fromTraceback;
    this.#tag = tag;
    if (reason === this.#reason) return [];
    this.#reason = reason;
    return [{ type: 'suspect', reason }];
  }
}

/**
 * What a line's events do to the suspects: a start resets them, other progress (a phase, the ready
 * line) clears the current one.
 */
export function followProgress(suspects: SuspectTracker, events: readonly LogEvent[]): void {
  for (const event of events) {
    if (event.type === 'start') suspects.reset();
    else if (event.type === 'phase' || event.type === 'ready') suspects.clear();
  }
}

export interface LogParserOptions {
  /** Extra fatal lines from the config (`health.fatal_patterns`), tested against the raw line. */
  fatalPatterns?: RegExp[];
}
