/** SimOptions with every default filled in, checked once at construction. */
import type { SimKvEventsOptions } from './kv-publisher.js';
import { CONTEXT_LEN, DEFAULT_MODEL, engineFor, timingFor } from './presets.js';
import {
  DEFAULT_THINK_TOKENS,
  REASONING_PARSERS,
  type ReasoningParserName,
  VLLM_REASONING_FIELDS,
  type VllmReasoningField,
} from './thinking.js';
import { FAILURE_MODES, type SimEngineOptions, type SimFailure, type SimOptions, type SimTiming } from './types.js';

export interface ResolvedSimOptions {
  port: number;
  host: string;
  name: string;
  model: string;
  kind: 'sglang' | 'vllm';
  version: 'new' | 'old';
  logFile: string | null;
  timing: SimTiming;
  engine: SimEngineOptions;
  failure: SimFailure | null;
  restartAfterMs: number | null;
  enableMetrics: boolean;
  apiKey: string | null;
  contextLen: number;
  modelPath: string | null;
  reasoningParser: ReasoningParserName | null;
  thinkTokens: readonly [number, number];
  vllmReasoningField: VllmReasoningField;
  kvEvents: SimKvEventsOptions | null;
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new TypeError(`SimOptions: ${message}`);
}

export function resolveOptions(opts: SimOptions): ResolvedSimOptions {
  check(
    Number.isInteger(opts.port) && opts.port > 0 && opts.port < 65536,
    `port must be an integer 1-65535, got ${opts.port}`,
  );
  const host = opts.host ?? '127.0.0.1';
  const timing = timingFor('fast', opts.timing);
  for (const [key, value] of Object.entries(timing)) {
    check(Number.isFinite(value) && value >= 0, `timing.${key} must be a number >= 0, got ${value}`);
  }
  check(timing.shards >= 1 && timing.graphBatches >= 1, 'timing.shards and timing.graphBatches must be >= 1');
  const engine = engineFor('fast', opts.engine);
  for (const [key, value] of Object.entries(engine)) {
    if (key === 'priorityScheduling') {
      check(typeof value === 'boolean', `engine.priorityScheduling must be a boolean, got ${value}`);
      continue;
    }
    check(Number.isFinite(value) && value >= 0, `engine.${key} must be a number >= 0, got ${value}`);
  }
  check(engine.maxRunningRequests >= 1, 'engine.maxRunningRequests must be >= 1');
  check(engine.maxTotalNumTokens >= 2, 'engine.maxTotalNumTokens must be >= 2');
  check(engine.slowdown > 0, 'engine.slowdown must be > 0');
  check(Number.isInteger(engine.pageSize) && engine.pageSize >= 1, 'engine.pageSize must be an integer >= 1');
  const failure = opts.failure ?? null;
  check(
    failure === null || FAILURE_MODES.includes(failure.mode),
    `failure.mode must be one of ${FAILURE_MODES.join(', ')}`,
  );
  const kind = opts.kind ?? 'sglang';
  check(kind === 'sglang' || kind === 'vllm', `kind must be sglang or vllm, got ${kind}`);
  const reasoningParser = opts.reasoningParser ?? null;
  check(
    reasoningParser === null || REASONING_PARSERS.includes(reasoningParser),
    `reasoningParser must be one of ${REASONING_PARSERS.join(', ')}, got ${reasoningParser}`,
  );
  const thinkTokens = opts.thinkTokens ?? DEFAULT_THINK_TOKENS;
  check(
    thinkTokens.length === 2 &&
      thinkTokens.every((n) => Number.isInteger(n) && n >= 0) &&
      thinkTokens[0] <= thinkTokens[1],
    `thinkTokens must be [MIN, MAX] integers, 0 <= MIN <= MAX, got ${JSON.stringify(thinkTokens)}`,
  );
  const vllmReasoningField = opts.vllmReasoningField ?? 'reasoning';
  check(
    VLLM_REASONING_FIELDS.includes(vllmReasoningField),
    `vllmReasoningField must be one of ${VLLM_REASONING_FIELDS.join(', ')}, got ${vllmReasoningField}`,
  );
  const kvEvents = opts.kvEvents ?? null;
  check(
    kvEvents === null || /^tcp:\/\/.+:(\d+|\*)$/.test(kvEvents.endpoint),
    `kvEvents.endpoint must be tcp://HOST:PORT, got ${kvEvents?.endpoint}`,
  );
  const version = opts.version ?? 'new';
  check(version === 'new' || version === 'old', `version must be new or old, got ${version}`);
  return {
    port: opts.port,
    host,
    name: opts.name ?? `${host}:${opts.port}`,
    model: opts.model ?? opts.modelPath ?? DEFAULT_MODEL,
    kind,
    version,
    logFile: opts.logFile ?? null,
    timing,
    engine,
    failure,
    restartAfterMs: opts.restartAfterMs ?? null,
    enableMetrics: opts.enableMetrics ?? true,
    apiKey: opts.apiKey ?? null,
    contextLen: CONTEXT_LEN,
    modelPath: opts.modelPath ?? null,
    reasoningParser,
    thinkTokens,
    vllmReasoningField,
    kvEvents,
  };
}

/** Applies `restart()` overrides; timing and engine merge key by key. */
export function mergeOptions(base: ResolvedSimOptions, patch: Partial<SimOptions>): ResolvedSimOptions {
  check(patch.port === undefined || patch.port === base.port, 'restart() cannot change the port');
  return resolveOptions({
    ...base,
    ...patch,
    timing: { ...base.timing, ...patch.timing },
    engine: { ...base.engine, ...patch.engine },
  });
}
