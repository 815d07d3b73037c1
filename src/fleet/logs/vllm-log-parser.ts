/**
 * Reads a vLLM OpenAI-server log one line at a time: process start, start-up phase, ready
 * (`Application startup complete.`: vLLM listens only once the engine is built,
 * docs/sglang-vllm-behaviour.md §6), fatal errors. Pure: no I/O, no clock.
 */
import type { LogEvent, LogParser, Phase } from './log-events.js';
import {
  type BarLabel,
  isExceptionLine,
  isIndented,
  isKilledLine,
  isTracebackHeader,
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
import { type LogLine, splitLogLine } from './traceback-reader.js';

const BARS: readonly BarLabel[] = [
  { label: 'Loading safetensors checkpoint shards', phase: 'loading_weights' },
  { label: 'Loading pt checkpoint shards', phase: 'loading_weights' },
  // `Capturing CUDA graphs (decode, FULL): ...`; older releases say `Capturing CUDA graph shapes:`.
  { label: 'Capturing CUDA graph', phase: 'capturing_cuda_graphs' },
];

const PHASE_LINES: ReadonlyArray<{ pattern: RegExp; phase: Phase }> = [
  {
    pattern: /Starting to load model|Using model weights format|Loading (model )?weights took|Model loading took/,
    phase: 'loading_weights',
  },
  // The profile run that sizes the KV cache includes torch.compile, which can take minutes.
  {
    pattern:
      /Dynamo bytecode transform time|Compiling a graph for|torch\.compile takes|Memory profiling takes|Available KV cache memory|GPU KV cache size|Maximum concurrency for|# (GPU|cuda) blocks: \d/,
    phase: 'allocating_kv_cache',
  },
  // V0 (0.4-0.6) announces the capture, with no bar: `Capturing the model for CUDA graphs. This may ...`.
  { pattern: /Graph capturing finished|Capturing the model for CUDA graphs/, phase: 'capturing_cuda_graphs' },
  {
    pattern:
      /init engine \(profile|Starting vLLM (API )?server|Available routes are|Started server process|Waiting for application startup/,
    phase: 'starting_http',
  },
];

/** Printed once by the API server process at each launch. */
const START = /vLLM API server version/;
/** Also early start-up lines, but `Initializing a V1 LLM engine` repeats per engine core (DP). */
const EARLY_START = /non-default args|Initializing an? (V1 )?LLM engine/;
const READY = /Application startup complete/;
const RUNTIME = /Avg prompt throughput|Avg generation throughput/;
/**
 * A record of the request layer (`[serving_chat.py:198]`, `serving_completion.py:131]`) or an access
 * line: the API server answers requests, so the engine was built (vLLM listens only then).
 */
const REQUEST_LAYER = /[[ ]serving_\w+\.py:\d+\]|"(GET|POST) \/v1\/[^"]* HTTP\/[\d.]+" \d{3}/;

/**
 * A fatal record followed by the traceback that explains it (engine core and worker processes;
 * V0's engine loop, after which every request fails with AsyncEngineDeadError, vllm#5443).
 */
const CRASH_HEAD =
  /EngineCore failed to start|EngineCore encountered a fatal error|WorkerProc failed to start|WorkerProc hit an exception|WorkerProc failed\.|Engine background task failed/;

const FATAL_LINES: readonly RegExp[] = [
  PORT_IN_USE,
  /Free memory on device .* is less than desired GPU memory utilization/,
  /CUDA out of memory|OutOfMemoryError/,
  /EngineDeadError/,
  /Engine core initialization failed/,
  /No available memory for the cache blocks/,
];

export interface VllmLine {
  /** The text after the process tag and record header, indentation kept. */
  message: string;
  /** Written through vLLM's logger (every line of a logged traceback repeats the header). */
  isRecord: boolean;
}

/** The process tag (`(EngineCore_DP0 pid=79) `) and record header stripped (traceback-reader.ts). */
export function vllmMessage(line: string): VllmLine {
  const { message, isRecord } = splitLogLine(line);
  return { message, isRecord };
}

export function createVllmLogParser(options: LogParserOptions = {}): LogParser {
  return new VllmLogParser(options.fatalPatterns ?? []);
}

class VllmLogParser implements LogParser {
  readonly #fatalPatterns: readonly RegExp[];
  readonly #phases = new PhaseTracker();
  // Logged tracebacks repeat the record header on every line, so only their content tells where
  // they end: any line that is neither a frame nor the exception line interrupts.
  readonly #crash = new CrashTracker({ interrupts: () => true });
  #started = false;
  /**
   * An unlogged traceback: an exception nobody caught, which ends its process, unless uvicorn is
   * reporting one request's failure (`Exception in ASGI application`) or Python one it ignored
   * (`Exception ignored in: ...`).
   */
  #rawTraceback: 'none' | 'fatal' | 'excused' = 'none';
  #lastLineExcusesTraceback = false;

  constructor(fatalPatterns: readonly RegExp[]) {
    this.#fatalPatterns = fatalPatterns;
  }

  readonly #suspects = new SuspectTracker();

  push(line: string): LogEvent[] {
    const split = splitLogLine(line);
    const events = this.#read(line, split);
    if (events.length > 0) followProgress(this.#suspects, events);
    if (this.#crash.reported || this.#phases.current === 'serving') return events;
    const suspects = this.#suspects.read(split);
    if (suspects.length > 0) events.push(...suspects);
    return events;
  }

  #read(line: string, { message, isRecord }: LogLine): LogEvent[] {
    const traced = this.#crash.continue(line, message);
    if (traced.consumed) return traced.events;
    const events = traced.events;

    const uncaught = this.#uncaughtException(message, isRecord);
    if (uncaught !== null) {
      events.push(...uncaught);
      return events;
    }
    const fatal = this.#fatal(line, message);
    if (fatal !== null) {
      events.push(...fatal);
      return events;
    }
    if (isIndented(message)) return events;

    const starts = START.test(message) || (!this.#started && EARLY_START.test(message));
    if (starts) this.#started = true;
    const boundary = starts ? 'start' : READY.test(message) ? 'ready' : null;
    events.push(...(boundary ? runBoundary(this.#crash, this.#phases, boundary) : this.#phaseOf(message, line)));
    return events;
  }

  /** Follows an unlogged traceback; a top-level `RuntimeError:` ends the process. */
  #uncaughtException(message: string, isRecord: boolean): LogEvent[] | null {
    if (this.#rawTraceback === 'none') {
      if (!isRecord && message.startsWith('Traceback (most recent call last)')) {
        this.#rawTraceback = this.#lastLineExcusesTraceback ? 'excused' : 'fatal';
        return [];
      }
      this.#lastLineExcusesTraceback =
        message.includes('Exception in ASGI application') || message.startsWith('Exception ignored ');
      return null;
    }
    if (!isRecord && (isIndented(message) || isTracebackHeader(message))) return [];
    const context = this.#rawTraceback;
    this.#rawTraceback = 'none';
    this.#lastLineExcusesTraceback = false;
    if (context === 'fatal' && isExceptionLine(message) && message.startsWith('RuntimeError')) {
      return this.#crash.report(message);
    }
    return null;
  }

  #fatal(line: string, message: string): LogEvent[] | null {
    if (matchesAny(line, this.#fatalPatterns)) return this.#crash.report(message);
    if (isIndented(message)) return null;
    if (isKilledLine(line)) return this.#crash.report(message);
    const head = CRASH_HEAD.exec(message);
    if (head !== null) {
      const tracebackAt = tracebackStart(message);
      const text = tracebackAt >= 0 ? message.slice(0, tracebackAt) : message;
      return this.#crash.reportHead(text.replace(/[.:\s]+$/, ''));
    }
    if (FATAL_LINES.some((pattern) => pattern.test(message))) return this.#crash.report(message);
    return null;
  }

  #phaseOf(message: string, line: string): LogEvent[] {
    const bar = lastProgressBar(message, BARS);
    const rule = PHASE_LINES.find(({ pattern }) => pattern.test(message));
    if (bar !== null && (rule === undefined || phaseRank(bar.phase) >= phaseRank(rule.phase))) {
      return this.#phases.advance(bar.phase, bar.progress, bar.etaSeconds);
    }
    if (rule !== undefined) return this.#phases.advance(rule.phase);
    // Stats lines only: the log was rotated while the server ran.
    if (this.#phases.current === null && (RUNTIME.test(message) || REQUEST_LAYER.test(line))) {
      return this.#phases.advance('serving');
    }
    return [];
  }
}
