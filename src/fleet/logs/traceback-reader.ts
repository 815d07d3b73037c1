/**
 * The one reader of Python tracebacks, shared by the SGLang and vLLM parsers. A log line is first
 * taken apart (`splitLogLine`): ANSI colours, a `\r` progress redraw, process tags such as
 * `(EngineCore_DP0 pid=4711) ` or `(VllmWorker rank=3 pid=9) `, torch's `[rank0]: ` and the logger
 * prefix (level, timestamp, `[file:line]`) are stripped, so a traceback reads the same whether it
 * was printed bare, logged by vLLM on every line, or written by one of several processes at once.
 * `TracebackReader` then follows tracebacks per process tag, chained (`The above exception was the
 * direct cause ...`, `During handling of the above exception ...`) or not, and yields each
 * exception line that ends one, and whether Python itself went on past it (`handled`). Pure: no I/O,
 * no clock.
 */
import { isIndented, isTracebackHeader } from './log-line-format.js';

export interface LogLine {
  /** The process tag without its parentheses (`EngineCore_DP0 pid=4711`); '' when untagged. */
  tag: string;
  /** The logger level of a logger record (`ERROR`, `WARNING`, ...); null otherwise. */
  level: string | null;
  /** Written through a logger (SGLang `[2025-03-14 06:56:42 TP1] `, vLLM `INFO 08-05 ... [f.py:1] `). */
  isRecord: boolean;
  /** The text after every prefix, indentation kept. */
  message: string;
}

const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;
/** `(EngineCore_DP0 pid=79) `, `(RayWorkerWrapper pid=664, ip=10.0.0.2) `; verl nests two. */
const PROCESS_TAG = /^\(([^()]*\bpid=\d+[^()]*)\) ?/;
/** torch.distributed's per-rank prefix on a rank's stderr: `[rank0]: `. */
const RANK_PREFIX = /^\[rank\d+\]: ?/;
/**
 * vLLM: `INFO 08-05 10:00:02 [api_server.py:1805] `; older `INFO 09-01 10:22:14 gpu_worker.py:284] `;
 * 2026 builds drop the time: `INFO [monitor.py:53] `.
 */
const VLLM_RECORD =
  /^(DEBUG|INFO|WARNING|ERROR|CRITICAL)( \d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?)? (\[[^\]]+\]|[\w.]+:\d+\]) ?/;
/** SGLang: `[2025-03-14 06:56:42 TP1] `, 2024's `[06:56:42 TP0] `, `[gpu_id=0] `. */
const SGLANG_RECORD = /^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d|gpu_id=)[^\]]*\] ?/;
/** uvicorn's own records: `INFO:     Started server process [123]`. */
const UVICORN_LEVEL = /^(INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+/;

/** Takes one log line apart; cheap for the common line that has none of the prefixes. */
export function splitLogLine(raw: string): LogLine {
  let line = raw;
  if (line.includes('\x1b')) line = line.replace(ANSI, '');
  const redraw = line.lastIndexOf('\r');
  if (redraw >= 0) line = line.slice(redraw + 1);
  let tag = '';
  while (line.charCodeAt(0) === 40 /* ( */) {
    const tagged = PROCESS_TAG.exec(line);
    if (tagged === null) break;
    tag = tagged[1];
    line = line.slice(tagged[0].length);
  }
  const first = line.charCodeAt(0);
  if (first === 91 /* [ */) {
    if (line.startsWith('[rank')) {
      const rank = RANK_PREFIX.exec(line);
      if (rank !== null) line = line.slice(rank[0].length);
    }
    // Regex tests, not matches: a busy log is read line by line, and match arrays cost collections.
    if (SGLANG_RECORD.test(line)) return { tag, level: null, isRecord: true, message: afterBracket(line) };
    return { tag, level: null, isRecord: false, message: line };
  }
  if (first >= 65 && first <= 90 /* A-Z */) {
    // Neither header holds a `]` before the one that ends it.
    if (VLLM_RECORD.test(line)) return { tag, level: LEVELS[first], isRecord: true, message: afterBracket(line) };
    const uvicorn = UVICORN_LEVEL.exec(line);
    if (uvicorn !== null) return { tag, level: uvicorn[1], isRecord: false, message: line.slice(uvicorn[0].length) };
  }
  return { tag, level: null, isRecord: false, message: line };
}

/** A record's level by its first letter (the header was matched): no string made per line. */
const LEVELS: Record<number, string> = { 68: 'DEBUG', 73: 'INFO', 87: 'WARNING', 69: 'ERROR', 67: 'CRITICAL' };

/** The text after the first `]` and the one space after it. */
function afterBracket(line: string): string {
  const end = line.indexOf(']') + 1;
  return line.charCodeAt(end) === 32 ? line.slice(end + 1) : line.slice(end);
}

export interface TracebackException {
  /** `ValueError`, `torch.OutOfMemoryError`, `Exception`. */
  type: string;
  /** What follows `Type: `; '' for a bare `AssertionError`. */
  message: string;
  /** The exception line as printed (after the prefixes). */
  text: string;
  /** The process tag of the traceback. */
  tag: string;
  /** It ends a later link of a chain whose earlier link was yielded: the final cause replaces it. */
  chained: boolean;
  /**
   * Python printed it and went on: the unraisable hook (`Exception ignored in: ...`, a `__del__` or
   * callback that raised), or the stdlib's resource tracker, a helper process that reports its own
   * errors and keeps running (vLLM 0.5's `KeyError: '/psm_...'`, vllm#5468). Never a failure.
   */
  handled: boolean;
}

/** Python's unraisable hook: `Exception ignored in: <function ...>` (3.14: `Exception ignored while ...`). */
const IGNORED_HEAD = /^Exception ignored (in|on|while)\b/;
/** The resource tracker's process runs `main` of this stdlib module: its outermost frame is there. */
const RESOURCE_TRACKER_FRAME = /multiprocessing[\\/]resource_tracker\.py", line \d+, in main\b/;

/** `File "/x/y.py", line 12, in f` (or `File "uvloop/loop.pyx", line 1518, in ...`). */
const FRAME = /^\s*File "[^"]*", line \d+/;
/** `KeyError: 'x'`, `torch.OutOfMemoryError: CUDA out of memory...`, bare `AssertionError`. */
const EXCEPTION_LINE = /^([A-Za-z_][\w.]*)(?::(?: (.*))?)?$/;

/**
 * An exception's name: Python classes are CapWords, and most end in Error or Exception
 * (`ncclUnhandledCudaError`). A source line of an unindented paste (`self.comm: ncclComm_t = ...`)
 * has a lower-case last name and is not one.
 */
function isExceptionName(name: string): boolean {
  const last = name.slice(name.lastIndexOf('.') + 1);
  const code = last.charCodeAt(0);
  return (code >= 65 && code <= 90) || /Error|Exception/.test(last);
}

/** The exception an exception-shaped message names, or null. */
export function exceptionOf(message: string): { type: string; message: string } | null {
  if (message.length === 0 || isIndented(message) || isTracebackHeader(message)) return null;
  const match = EXCEPTION_LINE.exec(message);
  if (match === null || !isExceptionName(match[1])) return null;
  // A bare name only when it looks like an exception: wrapped frames leave words at column 0.
  if (match[2] === undefined && !message.includes(':') && !/(Error|Exception|Interrupt|Exit)$/.test(match[1])) {
    return null;
  }
  return { type: match[1], message: match[2] ?? '' };
}

interface TagState {
  /** Between `Traceback (most recent call last)` (or a first frame) and its exception line. */
  inTraceback: boolean;
  /** The line before was a `File "..."` frame: this one is its source line, even unindented. */
  afterFrame: boolean;
  /** The latest line ended a traceback: a chain header next continues the chain. */
  afterException: boolean;
  /** A chain header followed the yielded exception: the next exception line is a later link. */
  chained: boolean;
  /** The line before was `Exception ignored in: ...`: the traceback it opens is an ignored one. */
  ignoredNext: boolean;
  /** This traceback is one Python went on past (`TracebackException.handled`). */
  handled: boolean;
  lines: number;
}

export class TracebackReader {
  /** Frames of one traceback are bounded: past this, the traceback is taken as over. */
  static readonly MAX_TRACEBACK_LINES = 2_000;
  /** Process tags followed at once; a log with more (a fleet's worth of pids) recycles them. */
  static readonly MAX_TAGS = 256;
  readonly #states = new Map<string, TagState>();

  /** The last line pushed belonged to a traceback (opener, frame, source line, chain header, exception). */
  partOfTraceback = false;

  /** Feeds one split line; returns the exception that this line ends a traceback with, if any. */
  push(line: LogLine): TracebackException | null {
    const existing = this.#states.get(line.tag);
    const inside = existing?.inTraceback === true;
    const thrown = this.#push(line, existing);
    this.partOfTraceback = thrown !== null || inside || this.#states.get(line.tag)?.inTraceback === true;
    return thrown;
  }

  #push(line: LogLine, state: TagState | undefined): TracebackException | null {
    const { message, tag } = line;
    if (message.includes('Traceback (most recent call last)')) {
      this.#open(this.#state(tag, state), { afterFrame: false, handled: false });
      return null;
    }
    if (state?.inTraceback !== true && message.startsWith('Exception ignored ') && IGNORED_HEAD.test(message)) {
      this.#state(tag, state).ignoredNext = true;
      return null;
    }
    if (state === undefined) {
      // A log cut inside a traceback, or one whose opener shared a line with a head: a frame opens it.
      if (!message.includes('File "') || !FRAME.test(message)) return null;
      this.#openAtFrame(this.#state(tag, state), message);
      return null;
    }
    state.ignoredNext = false;
    if (!state.inTraceback) return this.#outside(state, message);
    if (++state.lines > TracebackReader.MAX_TRACEBACK_LINES) {
      this.#states.delete(tag);
      return null;
    }
    // The outermost frame comes first (`most recent call last`): whose process this traceback is.
    if (state.lines === 1 && RESOURCE_TRACKER_FRAME.test(message)) state.handled = true;
    if (message.trim().length === 0 || isIndented(message) || isTracebackHeader(message)) {
      // An indented frame's source line is indented too: only an unindented frame sets afterFrame.
      state.afterFrame = false;
      return null;
    }
    if (FRAME.test(message)) {
      state.afterFrame = true;
      return null;
    }
    if (state.afterFrame) {
      // The source line of an unindented frame (a paste that lost its indentation).
      state.afterFrame = false;
      return null;
    }
    const exception = exceptionOf(message);
    if (exception === null) {
      this.#states.delete(tag);
      return null;
    }
    const { chained, handled } = state;
    state.inTraceback = false;
    state.afterException = true;
    state.chained = false;
    return { ...exception, text: message, tag, chained, handled };
  }

  /** Outside a traceback: a frame opens one; after an exception line a chain header keeps it open. */
  #outside(state: TagState, message: string): TracebackException | null {
    if (FRAME.test(message)) {
      this.#openAtFrame(state, message);
      return null;
    }
    if (!state.afterException) return null;
    if (message.trim().length === 0) return null;
    if (isTracebackHeader(message)) {
      state.chained = true;
      return null;
    }
    state.afterException = false;
    state.chained = false;
    return null;
  }

  /** A traceback opens, by its opener line or (a cut log, a pasted one) by a frame. */
  #open(state: TagState, first: { afterFrame: boolean; handled: boolean }): void {
    // A later link only after an exception line and a chain header; else a traceback of its own.
    state.chained = state.afterException && state.chained;
    state.handled = first.handled || state.ignoredNext || (state.chained && state.handled);
    state.ignoredNext = false;
    state.inTraceback = true;
    state.afterFrame = first.afterFrame;
    state.afterException = false;
    state.lines = 0;
  }

  #openAtFrame(state: TagState, frame: string): void {
    this.#open(state, { afterFrame: !isIndented(frame), handled: RESOURCE_TRACKER_FRAME.test(frame) });
  }

  #state(tag: string, existing: TagState | undefined): TagState {
    if (existing !== undefined) return existing;
    if (this.#states.size >= TracebackReader.MAX_TAGS) {
      const oldest = this.#states.keys().next().value;
      if (oldest !== undefined) this.#states.delete(oldest);
    }
    const state: TagState = {
      inTraceback: false,
      afterFrame: false,
      afterException: false,
      chained: false,
      ignoredNext: false,
      handled: false,
      lines: 0,
    };
    this.#states.set(tag, state);
    return state;
  }
}
