/**
 * Picks the log parser for a backend kind and compiles the configured fatal patterns once.
 * A parser follows one run of one file: when the watcher reports a reset, make a new one.
 */
import type { BackendKind } from '../../config/types.js';
import type { LogEvent, LogParser } from './log-events.js';
import { isIndented, isKilledLine, matchesAny, shortReason } from './log-line-format.js';
import { createSglangLogParser } from './sglang-log-parser.js';
import { createVllmLogParser } from './vllm-log-parser.js';

export function createLogParser(kind: BackendKind, fatalPatterns: readonly string[]): LogParser {
  const patterns = compileFatalPatterns(fatalPatterns);
  switch (kind) {
    case 'sglang':
      return createSglangLogParser({ fatalPatterns: patterns });
    case 'vllm':
      return createVllmLogParser({ fatalPatterns: patterns });
    case 'openai':
      return createGenericLogParser(patterns);
  }
}

/** Each pattern is a regular expression (`health.fatal_patterns`); the message names the bad one. */
function compileFatalPatterns(sources: readonly string[]): RegExp[] {
  return sources.map((source, index) => {
    try {
      return new RegExp(source);
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new Error(`health.fatal_patterns[${index}] is not a valid regular expression: ${why}`);
    }
  });
}

const OUT_OF_MEMORY = /CUDA out of memory|OutOfMemoryError/;

/**
 * Any OpenAI-compatible server: nothing is known of its start-up lines, so only the configured
 * patterns and out-of-memory (CUDA, or the OOM killer's `Killed`) are fatal, once per parser.
 */
function createGenericLogParser(fatalPatterns: readonly RegExp[]): LogParser {
  let reported = false;
  return {
    push(line: string): LogEvent[] {
      if (reported) return [];
      const fatal =
        matchesAny(line, fatalPatterns) || (!isIndented(line) && (OUT_OF_MEMORY.test(line) || isKilledLine(line)));
      if (!fatal) return [];
      reported = true;
      return [{ type: 'fatal', reason: shortReason(line.replace(/^(\[[^\]]*\]:? ?)+/, '')) }];
    },
  };
}
