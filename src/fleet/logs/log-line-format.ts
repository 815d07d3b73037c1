/**
 * Shapes of lines that Python inference servers print, shared by the SGLang and vLLM parsers:
 * tqdm progress bars, the end of a traceback, a shell's `Killed`, and a short reason for humans.
 * Pure functions, no state.
 */
import type { Phase, Progress } from './log-events.js';

/** A tqdm bar recognised by its description, e.g. `Capturing batches (`. */
export interface BarLabel {
  label: string;
  phase: Phase;
}

export interface BarReading {
  phase: Phase;
  progress: Progress | null;
  etaSeconds: number | null;
}

/**
 * `| 113/158 [00:16<00:06, ...]`: tqdm's `{n}/{total} [{elapsed}<{remaining}`. `remaining` is `?`
 * until the rate is known (docs/sglang-vllm-behaviour.md §2 point 7: `0/52 [00:04<?, ?it/s]`); pasted logs
 * may cut the line after the counts (`| 74/74`).
 */
const BAR_COUNTS = /(?<=[\s|])(\d+)\/(\d+)(?: \[\d[\d:]*<(\?|\d[\d:]*))?/;

/**
 * The latest state of a known bar in `line`. Redraws may arrive run together on one line when
 * something stripped the `\r`s (docs/sglang-vllm-behaviour.md §2, last paragraph), so the last bar wins; if
 * its counts are cut off, an earlier complete redraw of the same phase gives them, else `progress`
 * is null.
 */
export function lastProgressBar(line: string, labels: readonly BarLabel[]): BarReading | null {
  let found: BarLabel | null = null;
  let foundAt = -1;
  for (const candidate of labels) {
    const at = line.lastIndexOf(candidate.label);
    if (at > foundAt) {
      found = candidate;
      foundAt = at;
    }
  }
  if (found === null) return null;
  // The bar's own counts are the first after its label.
  const counts = BAR_COUNTS.exec(line.slice(foundAt));
  if (counts !== null) {
    return {
      phase: found.phase,
      progress: { done: Number(counts[1]), total: Number(counts[2]) },
      etaSeconds: counts[3] === undefined ? null : parseEta(counts[3]),
    };
  }
  const earlier = lastProgressBar(line.slice(0, foundAt), labels);
  if (earlier !== null && earlier.phase === found.phase) return earlier;
  return { phase: found.phase, progress: null, etaSeconds: null };
}

/** tqdm's interval format: `MM:SS` or `H:MM:SS`; `?` (unknown) gives null. */
function parseEta(text: string): number | null {
  if (!/^\d+(:\d+){1,2}$/.test(text)) return null;
  return text.split(':').reduce((seconds, part) => seconds * 60 + Number(part), 0);
}

/**
 * The line that ends a Python traceback: `RuntimeError: msg`, `torch.OutOfMemoryError: msg`,
 * `KeyError: 'embed_tokens.weight'`, a bare `AssertionError`. Python prints it at column 0 after
 * the indented frames. Without a message only exception-like names count: a frame pasted from a
 * terminal wraps at its width and leaves word ends such as `ess` at column 0 (sglang#6297).
 */
export function isExceptionLine(message: string): boolean {
  return (
    (/^[A-Za-z_][\w.]*:(\s.*)?$/.test(message) ||
      /^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Iteration)$/.test(message)) &&
    !isTracebackHeader(message)
  );
}

/** Column-0 lines that belong inside a traceback rather than end it. */
export function isTracebackHeader(message: string): boolean {
  return (
    message.startsWith('Traceback (most recent call last)') ||
    message.startsWith('During handling of the above exception') ||
    message.startsWith('The above exception was the direct cause')
  );
}

const TRACEBACK_OPENER = 'Traceback (most recent call last)';

/** Where a traceback starts within a message (`... hit an exception: Traceback (...)`), or -1. */
export function tracebackStart(message: string): number {
  return message.indexOf(TRACEBACK_OPENER);
}

/** Traceback frames, source context and `^^^^` markers are indented; log records never are. */
export function isIndented(line: string): boolean {
  return line.length > 0 && (line[0] === ' ' || line[0] === '\t');
}

/**
 * What bash prints when the OOM killer ends a job: a bare `Killed`, or
 * `./serve.sh: line 5: 12345 Killed   python -m sglang.launch_server ...` when the script's own
 * stderr goes to the log.
 */
export function isKilledLine(line: string): boolean {
  return /^Killed\s*$/.test(line) || /: line \d+:\s+\d+ Killed\b/.test(line);
}

/**
 * uvicorn (SGLang's and vLLM's HTTP server) could not take the port, and the process exits: another
 * process holds it, often an old server still answering there, which must not be taken for this one.
 */
export const PORT_IN_USE = /error while attempting to bind on address .*address already in use/;

const MAX_REASON_LENGTH = 200;

/** A one-line reason for humans: whitespace collapsed, cut at about 200 characters. */
export function shortReason(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= MAX_REASON_LENGTH ? flat : `${flat.slice(0, MAX_REASON_LENGTH - 1)}…`;
}

/** Whether any configured pattern matches; patterns are compiled once by the caller. */
export function matchesAny(line: string, patterns: readonly RegExp[]): boolean {
  return patterns.some((pattern) => {
    pattern.lastIndex = 0;
    return pattern.test(line);
  });
}
