/**
 * Reads an SGLang server log one line at a time and says what it implies for the lifecycle:
 * a process start, the start-up phase (with tqdm progress), the ready line, or a fatal error.
 * Pure: no I/O, no clock. Line forms and their order are in docs/sglang-vllm-behaviour.md §2; fatal ones
 * in §3.
 */
import type { LogEvent, LogParser, Phase } from './log-events.js';
import {
  type BarLabel,
  isExceptionLine,
  isIndented,
  isKilledLine,
  lastProgressBar,
  matchesAny,
  PORT_IN_USE,
  tracebackStart,
} from './log-line-format.js';
import {
  CrashTracker,
  followProgress,
  type LogParserOptions,
  PhaseTracker,
  phaseRank,
  runBoundary,
  SuspectTracker,
} from './log-parser-state.js';
import { splitLogLine } from './traceback-reader.js';

const BARS: readonly BarLabel[] = [
  { label: 'Loading safetensors checkpoint shards', phase: 'loading_weights' },
  { label: 'Loading pt checkpoint shards', phase: 'loading_weights' },
  { label: 'Multi-thread loading shards', phase: 'loading_weights' },
  // `Capturing batches (bs=512 avail_mem=3.10 GB)` and the older `Capturing batches (avail_mem=...)`.
  { label: 'Capturing batches (', phase: 'capturing_cuda_graphs' },
  // Piecewise CUDA graphs (late 2025+): compile, then capture, per token count.
  { label: 'Compiling num tokens (', phase: 'capturing_cuda_graphs' },
  { label: 'Capturing num tokens (', phase: 'capturing_cuda_graphs' },
];

const PHASE_LINES: ReadonlyArray<{ pattern: RegExp; phase: Phase }> = [
  { pattern: /Init torch distributed begin/, phase: 'launching' },
  { pattern: /Load weight begin|Using model weights format/, phase: 'loading_weights' },
  { pattern: /Load weight end|KV Cache is allocated|Memory pool end/, phase: 'allocating_kv_cache' },
  // Old `Capture cuda graph begin/bs/end`, 2026 `Capture target decode CUDA graph begin` with
  // `target verify` / `draft decode` / `target prefill` variants, `Capture piecewise CUDA graph end`.
  { pattern: /Capture [\w ]*cuda graph (begin|end|bs)\b/i, phase: 'capturing_cuda_graphs' },
  // The scheduler is built; the tokenizer process now starts uvicorn (docs/sglang-vllm-behaviour.md §1.1).
  {
    pattern:
      /max_total_num_tokens=|Engine startup timings|Started server process|Waiting for application startup|Application startup complete/,
    phase: 'starting_http',
  },
  // uvicorn logs `Application startup complete.` before it binds; `Uvicorn running on` means the
  // port is open and the warm-up thread's request can run (docs/sglang-vllm-behaviour.md §1.2).
  { pattern: /Uvicorn running on/, phase: 'warming_up' },
];

/** The warm-up thread's own requests (docs/sglang-vllm-behaviour.md §1.2), seen as access lines. */
const WARMUP_REQUEST = /"(GET \/(get_)?model_info|POST \/(generate|encode)) HTTP/;
/** Per-batch stats, old `Decode batch.` and 2026 `Decode batch,` (docs/sglang-vllm-behaviour.md §2 point 11). */
const BATCH_LINE = /\b(Prefill|Decode) batch[.,]/;

const START = /^server_args=|server_args=ServerArgs\(/;
const READY = /The server is fired up and ready to roll/;

/** A fatal head that the traceback after it explains (docs/sglang-vllm-behaviour.md §1.5, §1.2). */
const CRASH_HEAD = /\b\w+ hit an exception\b|Initialization failed\. warmup error/;
/**
 * Python's multiprocessing prints `Process Process-6:` and the traceback when a child process (a
 * scheduler, the detokenizer) ends on an exception nobody caught (sglang#5762).
 */
const CHILD_PROCESS_DIED = /^Process ([\w-]+):$/;

const FATAL_LINES: readonly RegExp[] = [
  PORT_IN_USE,
  /Not enough memory/,
  /Capture cuda graph failed/i,
  /CUDA out of memory|OutOfMemoryError/,
  /Initialization failed/,
  /Received sigquit from a child process/,
  /SIGQUIT received/,
  /scheduler is dead/,
  /scheduler died during initialization/,
  /DistStoreError/,
  /Process group watchdog thread terminated with exception/,
];

/**
 * Every rank logs this right after weight loading when `--max-total-tokens` is set and the memory
 * left for the KV cache is none: `max_total_tokens=131072 is larger than the profiled value
 * -561981`. `Not enough memory` follows, but the run is over here. A positive value is a warning.
 */
const NO_KV_BUDGET = /is larger than the profiled value (-\d+|0)\b/;

/** SGLang's logger prefix: `[2025-03-14 06:56:42 TP1] `, 2024's `[06:56:42 TP0] `, `[gpu_id=0] `. */
const RECORD_PREFIX = /^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d|gpu_id=)/;

/**
 * The message without bracketed prefixes (the logger's, torch's `[rank0]:[E1014 ...]`) or
 * uvicorn's level, keeping any indentation after them.
 */
function sglangMessage(line: string): string {
  return line.replace(/^(\[[^\]]*\]:? ?)+/, '').replace(/^(INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+/, '');
}

export function createSglangLogParser(options: LogParserOptions = {}): LogParser {
  return new SglangLogParser(options.fatalPatterns ?? []);
}

class SglangLogParser implements LogParser {
  readonly #fatalPatterns: readonly RegExp[];
  readonly #phases = new PhaseTracker();
  readonly #crash = new CrashTracker({
    // Traceback lines have no logger prefix; a new record means the traceback is over.
    interrupts: (line) => RECORD_PREFIX.test(line),
    // With TP > 1 every rank reports the same crash; the first exception line is the reason.
    continues: (line, message) => RECORD_PREFIX.test(line) && CRASH_HEAD.test(message),
    endsTraceback: (line, message) => !RECORD_PREFIX.test(line) && isExceptionLine(message),
  });

  constructor(fatalPatterns: readonly RegExp[]) {
    this.#fatalPatterns = fatalPatterns;
  }

  readonly #suspects = new SuspectTracker();

  push(line: string): LogEvent[] {
    const events = this.#read(line);
    if (events.length > 0) followProgress(this.#suspects, events);
    if (this.#crash.reported || this.#phases.current === 'serving') return events;
    const suspects = this.#suspects.read(splitLogLine(line));
    if (suspects.length > 0) events.push(...suspects);
    return events;
  }

  #read(line: string): LogEvent[] {
    const message = sglangMessage(line);
    const traced = this.#crash.continue(line, message);
    if (traced.consumed) return traced.events;
    const events = traced.events;

    const fatal = this.#fatal(line, message);
    if (fatal !== null) {
      events.push(...fatal);
      return events;
    }
    if (isIndented(line)) return events;

    const boundary = START.test(message) ? 'start' : READY.test(message) ? 'ready' : null;
    events.push(...(boundary ? runBoundary(this.#crash, this.#phases, boundary) : this.#phaseOf(message)));
    return events;
  }

  /** The fatal events for this line, or null when it is not a fatal line. */
  #fatal(line: string, message: string): LogEvent[] | null {
    if (matchesAny(line, this.#fatalPatterns)) return this.#crash.report(message);
    if (isIndented(line)) return null;
    if (isKilledLine(line)) return this.#crash.report(message);
    const head = CRASH_HEAD.exec(message);
    if (head !== null) {
      const tracebackAt = tracebackStart(message);
      const afterHead = message.slice(head.index + head[0].length).replace(/^[:\s]+/, '');
      if (tracebackAt >= 0) return this.#crash.reportHead(trimHead(message.slice(0, tracebackAt)));
      if (afterHead === '') return this.#crash.reportHead(trimHead(message));
      return this.#crash.report(message);
    }
    const child = CHILD_PROCESS_DIED.exec(line);
    if (child !== null) return this.#crash.reportHead(`Process ${child[1]} ended on an exception`);
    if (FATAL_LINES.some((pattern) => pattern.test(message))) return this.#crash.report(message);
    if (NO_KV_BUDGET.test(message)) return this.#crash.report(`Not enough memory for the KV cache: ${message}`);
    return null;
  }

  #phaseOf(message: string): LogEvent[] {
    const bar = lastProgressBar(message, BARS);
    const rule = PHASE_LINES.find(({ pattern }) => pattern.test(message));
    if (bar !== null && (rule === undefined || phaseRank(bar.phase) >= phaseRank(rule.phase))) {
      return this.#phases.advance(bar.phase, bar.progress, bar.etaSeconds);
    }
    if (rule !== undefined) return this.#phases.advance(rule.phase);
    return this.#runtimePhase(message);
  }

  /**
   * The warm-up request prints the same batch line as real traffic (docs/sglang-vllm-behaviour.md §1.2), so
   * batch lines mean `warming_up` right after HTTP came up, and `serving` only when the log shows
   * no start-up at all (it was rotated while the server ran).
   */
  #runtimePhase(message: string): LogEvent[] {
    const current = this.#phases.current;
    const batch = BATCH_LINE.test(message);
    if (current === null) return batch ? this.#phases.advance('serving') : [];
    if (current === 'starting_http' && (batch || WARMUP_REQUEST.test(message))) {
      return this.#phases.advance('warming_up');
    }
    return [];
  }
}

/** `Scheduler hit an exception: ` → `Scheduler hit an exception`. */
function trimHead(text: string): string {
  return text.replace(/[:\s]+$/, '');
}
