/**
 * `fleetgate sim`: one or more simulated SGLang (or vLLM) servers, e.g.
 * `fleetgate sim --ports 30000-30006 --log-dir logs --fail 3:cuda_oom_capture`.
 * Runs until SIGINT / SIGTERM, then stops every server and returns 0; bad flags return 2.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseDuration } from '../config/duration.js';
import { loadChatModel } from '../model/chat-model.js';
import {
  FAILURE_MODES,
  fleetOptions,
  SIM_SPEEDS,
  type SimEngineOptions,
  type SimFailure,
  type SimFailureMode,
  SimFleet,
  type SimSpeed,
} from '../sim/index.js';
import type { SimKvEventsOptions } from '../sim/kv-publisher.js';
import { STDOUT_LOG } from '../sim/log-writer.js';
import {
  REASONING_PARSERS,
  type ReasoningParserName,
  VLLM_REASONING_FIELDS,
  type VllmReasoningField,
} from '../sim/thinking.js';
import { onFaultSignal, startupFault } from './sim-fault-file.js';
import { readFlags, UsageError, verbArgs } from './verb-args.js';

const usage = `usage: fleetgate sim (--ports FROM-TO | --port N ...) [options]

  --ports 30000-30006      ports, a range or a comma list (servers are named gpu0, gpu1, ...)
  --port N                 one port (repeatable)
  --host 127.0.0.1         address to listen on
  --log-dir DIR            write DIR/sglang_gpu{i}.log per server (truncated at start, like '> log')
  --model NAME             model_path (default meta-llama/Llama-3.1-8B-Instruct; --model-path's DIR when given)
  --model-path DIR         a model directory (Hugging Face layout: tokenizer.json, tokenizer_config.json, chat
                           template), as SGLang takes it: chat prompts are rendered with its template and
                           counted with its tokenizer, and a raw prompt (/generate input_ids, /v1/completions
                           token ids) holding a rendered chat and part of an answer continues that answer
  --reasoning-parser qwen3|qwen3-thinking|deepseek-r1
                           thinking mode: each answer reasons (<think>...</think>) before it answers; chat
                           answers carry the reasoning in reasoning_content (vLLM: see --vllm-reasoning-field),
                           honouring separate_reasoning, stream_reasoning and chat_template_kwargs.enable_thinking
  --think-tokens MIN-MAX   reasoning length in tokens, fixed per prompt (default 32-96); max_tokens and
                           <sim:len=N> bound the whole answer, reasoning included
  --vllm-reasoning-field reasoning|reasoning_content|both
                           --kind vllm: the reasoning field by version: reasoning (v0.16+, default),
                           reasoning_content (up to v0.11.0), both (the versions in between)
  --kind sglang|vllm       server kind (default sglang)
  --version new|old        SGLang generation: old = v0.4 (/health 200 during warm-up)
  --speed fast|demo|realistic   start-up timing preset (default demo: ~20 s per server)
  --stagger DUR            server i starts i*DUR later (e.g. 2s)
  --fail IDX:MODE[:ARG]    scripted failure of server IDX (repeatable); MODE one of
                           ${FAILURE_MODES.join(', ')};
                           ARG: delay after ready (e.g. 30s) or the capture batch index;
                           dp_rank_dead takes :AFTER[:FRACTION] (share of new requests
                           that hang with no byte, default 0.5)
  --restart-after DUR      relaunch a server this long after it exits on a fatal error
  --token-ms MS            decode step time (0 = as fast as possible)
  --enable-priority-scheduling  admit queued requests by their "priority" (larger first), like SGLang's flag;
                           a request finding every batch slot taken preempts running ones of a lower priority
  --priority-scheduling-preemption-threshold N  by more than N (default 10, as SGLang)
  --max-running N          max running requests (continuous batch cap)
  --max-total-tokens N     KV-cache pool size in tokens
  --batch-penalty X        step time grows by X per running request
  --max-tokens N           output length when a request names none (default 16)
  --page-size N            tokens per prefix-cache page (SGLang's --page-size; default 16)
  --kv-events-config JSON  publish KV-cache events as SGLang does, e.g.
                           '{"publisher":"zmq","endpoint":"tcp://127.0.0.1:5557","topic":"kv-events"}'
                           (optional "replay_endpoint", "buffer_steps"); server i binds PORT + i (port 0: any
                           free one); /server_info reports them in kv_events
  --kv-events-encoding array|map
                           array: positional (SGLang, vLLM before PR 42892; sglang's default); map: tagged
                           by "type" at both levels (vLLM after it; vllm's default)
  --kv-events-drop-seqs FROM-TO
                           publish nothing for these seqs (they stay replayable): a subscriber sees a gap
  --api-key KEY            require 'Authorization: Bearer KEY' like --api-key
  --no-metrics             /metrics answers 404, like SGLang without --enable-metrics
  --quiet                  print nothing but errors

As one engine under fleetgate launch (one port):
  --name NAME              server name, e.g. gpu3 (its digits are the GPU in log lines)
  --log-stdout             write the server log to stdout, as SGLang does (launch appends it to the log file)
  --exit-on-failure        exit with status 1 when the server dies of a fatal error, like a real engine
  --mem-fraction-static X  accepted like SGLang's flag; see --fail-if-mem-fraction-above
  --fail-if-mem-fraction-above Y
                           the --fail failures happen only while --mem-fraction-static is above Y: a
                           GPU with less free memory, which a lower fraction (a launch remedy) fixes
  --fail-only-on NAME      the --fail failures happen only if --name is NAME (one command line for a
                           whole fleet, one faulty GPU)
  --start-delay DUR        wait this long before the first log line (engines launched one after another)
  --fault-file PATH        faults for a running engine (bench/soak): the file names a start-up failure
                           (not_enough_memory, cuda_oom_capture) this run has, or, on SIGUSR2, one it
                           gets now (dp_rank_dead[:FRACTION], scheduler_dead_http_alive, ...); consumed
  --slow-on NAME:FACTOR    if --name is NAME, generate FACTOR times slower (a straggler in a fleet
                           launched from one command line)
`;

/** A duration flag (`250ms`, `10s`, `2m`), parsed as the config parses durations. */
export function parseDurationFlag(text: string, flag: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new UsageError(`${flag}: '${text}' is not a duration (e.g. 250ms, 10s, 2m)`);
  return ms;
}

function parsePort(text: string, flag: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new UsageError(`${flag}: '${text}' is not a port (1-65535)`);
  return port;
}

/** `30000-30006` or `30000,30002`. */
export function parsePorts(text: string): number[] {
  const ports: number[] = [];
  for (const part of text.split(',')) {
    const range = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(part);
    if (range) {
      const from = parsePort(range[1], '--ports');
      const to = parsePort(range[2], '--ports');
      if (to < from) throw new UsageError(`--ports: range '${part}' runs backwards`);
      for (let p = from; p <= to; p++) ports.push(p);
    } else {
      ports.push(parsePort(part.trim(), '--ports'));
    }
  }
  if (new Set(ports).size !== ports.length) throw new UsageError('--ports: a port is listed twice');
  return ports;
}

function number(text: string | undefined, flag: string, min: number): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value < min) throw new UsageError(`${flag}: '${text}' must be a number >= ${min}`);
  return value;
}

/** `IDX:MODE[:ARG]`, and `IDX:dp_rank_dead[:AFTER[:FRACTION]]` */
export function parseFailure(text: string, servers: number): [number, SimFailure] {
  const [idxText, mode, arg, ...rest] = text.split(':');
  const index = Number(idxText);
  const extra = mode === 'dp_rank_dead' ? rest.slice(1) : rest;
  if (mode === undefined || extra.length > 0 || !Number.isInteger(index)) {
    throw new UsageError(`--fail: '${text}' is not IDX:MODE[:ARG]`);
  }
  if (index < 0 || index >= servers)
    throw new UsageError(`--fail: server index ${index} is out of range 0-${servers - 1}`);
  if (!FAILURE_MODES.includes(mode as SimFailureMode)) {
    throw new UsageError(`--fail: unknown mode '${mode}' (one of ${FAILURE_MODES.join(', ')})`);
  }
  switch (mode as SimFailureMode) {
    case 'crash_after_ready':
    case 'scheduler_dead_http_alive':
    case 'hang_after_ready':
      return [index, { mode, afterMs: arg === undefined ? 30_000 : parseDurationFlag(arg, '--fail') } as SimFailure];
    case 'dp_rank_dead': {
      const afterMs = arg === undefined ? 30_000 : parseDurationFlag(arg, '--fail');
      const fraction = number(rest[0], '--fail', 0);
      if (fraction !== undefined && fraction > 1) throw new UsageError(`--fail: fraction '${rest[0]}' must be 0-1`);
      return [index, { mode: 'dp_rank_dead', afterMs, fraction }];
    }
    case 'cuda_oom_capture':
    case 'hang_capture': {
      const atBatch = arg === undefined ? undefined : number(arg, '--fail', 0);
      return [index, { mode, atBatch } as SimFailure];
    }
    default:
      if (arg !== undefined) throw new UsageError(`--fail: mode '${mode}' takes no argument`);
      return [index, { mode } as SimFailure];
  }
}

const SIM_FLAGS = {
  ports: { type: 'string' },
  port: { type: 'string', multiple: true },
  host: { type: 'string' },
  'log-dir': { type: 'string' },
  model: { type: 'string' },
  'model-path': { type: 'string' },
  'reasoning-parser': { type: 'string' },
  'think-tokens': { type: 'string' },
  'vllm-reasoning-field': { type: 'string' },
  kind: { type: 'string' },
  version: { type: 'string' },
  speed: { type: 'string' },
  stagger: { type: 'string' },
  fail: { type: 'string', multiple: true },
  'restart-after': { type: 'string' },
  'token-ms': { type: 'string' },
  'max-running': { type: 'string' },
  'max-total-tokens': { type: 'string' },
  'batch-penalty': { type: 'string' },
  'max-tokens': { type: 'string' },
  'api-key': { type: 'string' },
  'page-size': { type: 'string' },
  'kv-events-config': { type: 'string' },
  'kv-events-encoding': { type: 'string' },
  'kv-events-drop-seqs': { type: 'string' },
  'no-metrics': { type: 'boolean' },
  'enable-priority-scheduling': { type: 'boolean' },
  'priority-scheduling-preemption-threshold': { type: 'string' },
  quiet: { type: 'boolean' },
  name: { type: 'string' },
  'log-stdout': { type: 'boolean' },
  'exit-on-failure': { type: 'boolean' },
  'mem-fraction-static': { type: 'string' },
  'fail-if-mem-fraction-above': { type: 'string' },
  'fail-only-on': { type: 'string' },
  'fault-file': { type: 'string' },
  'slow-on': { type: 'string' },
  'start-delay': { type: 'string' },
} as const;

type SimFlags = ReturnType<typeof readFlags<typeof SIM_FLAGS>>['values'];

export function parseSimArgs(argv: string[]) {
  const { values } = readFlags(argv, SIM_FLAGS);
  if (values.help) return null;
  const ports = [
    ...(values.ports ? parsePorts(values.ports) : []),
    ...(values.port ?? []).map((p) => parsePort(p, '--port')),
  ];
  if (ports.length === 0) throw new UsageError('give --ports FROM-TO or --port N');
  if (new Set(ports).size !== ports.length) throw new UsageError('a port is given twice');
  const kind = values.kind ?? 'sglang';
  if (kind !== 'sglang' && kind !== 'vllm') throw new UsageError(`--kind: '${kind}' must be sglang or vllm`);
  const version = values.version ?? 'new';
  if (version !== 'new' && version !== 'old') throw new UsageError(`--version: '${version}' must be new or old`);
  const speed = (values.speed ?? 'demo') as SimSpeed;
  if (!SIM_SPEEDS.includes(speed)) throw new UsageError(`--speed: '${speed}' must be one of ${SIM_SPEEDS.join(', ')}`);
  const single = (flag: string) => {
    if (ports.length !== 1) throw new UsageError(`${flag} needs exactly one port`);
  };
  if (values.name !== undefined) single('--name');
  if (values['log-stdout']) single('--log-stdout');
  if (values['log-stdout'] && values['log-dir'] !== undefined)
    throw new UsageError('--log-stdout and --log-dir exclude each other');
  const faultFile = values['fault-file'] ?? null;
  const startDelay =
    values['start-delay'] === undefined ? 0 : parseDurationFlag(values['start-delay'], '--start-delay');
  const fleet = fleetOptions({
    ports,
    host: values.host,
    model: values.model,
    kind,
    version,
    speed,
    logDir: values['log-dir'] ?? null,
    staggerMs: values.stagger === undefined ? 0 : parseDurationFlag(values.stagger, '--stagger'),
    failures: failuresOf(values, ports.length),
    engine: engineOf(values),
    restartAfterMs:
      values['restart-after'] === undefined ? null : parseDurationFlag(values['restart-after'], '--restart-after'),
    enableMetrics: !values['no-metrics'],
    apiKey: values['api-key'] ?? null,
    ...thinkingOf(values),
  });
  const kvEvents = kvEventsOf(values, kind);
  const options = fleet.map((o, index) => ({
    ...o,
    kvEvents: kvEvents?.(index) ?? null,
    name: values.name ?? o.name,
    timing: { ...o.timing, startDelayMs: (o.timing?.startDelayMs ?? 0) + startDelay },
    logFile: values['log-stdout'] ? STDOUT_LOG : o.logFile,
  }));
  // Under --log-stdout, stdout is the server's log: our own lines would only clutter it.
  const quiet = values.quiet === true || values['log-stdout'] === true;
  return { options, quiet, exitOnFailure: values['exit-on-failure'] === true, faultFile };
}

/** `tcp://HOST:PORT` with PORT moved by `offset` (port 0 and `*` stay: any free port). */
function offsetPort(endpoint: string, offset: number): string {
  const match = /^(tcp:\/\/.+):(\d+|\*)$/.exec(endpoint);
  if (match === null) throw new UsageError(`--kv-events-config: endpoint '${endpoint}' is not tcp://HOST:PORT`);
  return match[2] === '*' || match[2] === '0' ? endpoint : `${match[1]}:${Number(match[2]) + offset}`;
}

/** `--kv-events-config` and its switches: server `index`'s publisher options, or null without the flag. */
function kvEventsOf(values: SimFlags, kind: 'sglang' | 'vllm'): ((index: number) => SimKvEventsOptions) | null {
  const raw = values['kv-events-config'];
  if (raw === undefined) return null;
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(raw) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`--kv-events-config: not JSON (${(error as Error).message})`);
  }
  if ((config.publisher ?? 'zmq') !== 'zmq') throw new UsageError('--kv-events-config: publisher must be "zmq"');
  const endpoint = typeof config.endpoint === 'string' ? config.endpoint : 'tcp://127.0.0.1:5557';
  const replay = typeof config.replay_endpoint === 'string' ? config.replay_endpoint : null;
  const encoding = values['kv-events-encoding'] ?? (kind === 'vllm' ? 'map' : 'array');
  if (encoding !== 'array' && encoding !== 'map')
    throw new UsageError(`--kv-events-encoding: '${encoding}' must be array or map`);
  const dropText = values['kv-events-drop-seqs'];
  const drop = dropText === undefined ? null : /^(\d+)-(\d+)$/.exec(dropText);
  if (drop === null && dropText !== undefined)
    throw new UsageError(`--kv-events-drop-seqs: '${dropText}' is not FROM-TO`);
  return (index) => ({
    endpoint: offsetPort(endpoint, index),
    topic: typeof config.topic === 'string' ? config.topic : '',
    replayEndpoint: replay === null ? null : offsetPort(replay, index),
    bufferSteps: typeof config.buffer_steps === 'number' ? config.buffer_steps : 10_000,
    encoding,
    dropSeqs: drop === null ? null : [Number(drop[1]), Number(drop[2])],
  });
}

/** `MIN-MAX` (or one number): the reasoning length range in tokens. */
export function parseThinkTokens(text: string): [number, number] {
  const match = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(text);
  const min = Number(match?.[1]);
  const max = Number(match?.[2] ?? match?.[1]);
  if (match === null || min > max) throw new UsageError(`--think-tokens: '${text}' is not MIN-MAX (e.g. 32-96)`);
  return [min, max];
}

/** Thinking mode's flags (`--model-path`, `--reasoning-parser`, `--think-tokens`, `--vllm-reasoning-field`). */
function thinkingOf(values: SimFlags) {
  const parser = values['reasoning-parser'];
  if (parser !== undefined && !REASONING_PARSERS.includes(parser as ReasoningParserName))
    throw new UsageError(`--reasoning-parser: '${parser}' must be one of ${REASONING_PARSERS.join(', ')}`);
  const field = values['vllm-reasoning-field'];
  if (field !== undefined && !VLLM_REASONING_FIELDS.includes(field as VllmReasoningField))
    throw new UsageError(`--vllm-reasoning-field: '${field}' must be one of ${VLLM_REASONING_FIELDS.join(', ')}`);
  const modelPath = values['model-path'];
  if (modelPath !== undefined) {
    try {
      loadChatModel(modelPath);
    } catch (error) {
      throw new UsageError(`--model-path: ${(error as Error).message}`);
    }
  }
  return {
    modelPath: modelPath ?? null,
    reasoningParser: (parser as ReasoningParserName | undefined) ?? null,
    thinkTokens: values['think-tokens'] === undefined ? undefined : parseThinkTokens(values['think-tokens']),
    vllmReasoningField: field as VllmReasoningField | undefined,
  };
}

/** The scripted start-up failures by server index: `--fail`, unless the memory or name conditions lift them. */
function failuresOf(values: SimFlags, count: number): Map<number, SimFailure> {
  const failures = new Map((values.fail ?? []).map((f) => parseFailure(f, count)));
  const fraction = number(values['mem-fraction-static'], '--mem-fraction-static', 0);
  const failAbove = number(values['fail-if-mem-fraction-above'], '--fail-if-mem-fraction-above', 0);
  if (failAbove !== undefined && fraction === undefined)
    throw new UsageError('--fail-if-mem-fraction-above needs --mem-fraction-static');
  if (failAbove !== undefined && (fraction as number) <= failAbove) failures.clear();
  const failOn = values['fail-only-on'];
  if (failOn !== undefined && (count !== 1 || values.name === undefined))
    throw new UsageError('--fail-only-on needs one port and --name');
  if (failOn !== undefined && failOn !== values.name) failures.clear();
  const faultFile = values['fault-file'] ?? null;
  if (faultFile !== null && count !== 1) throw new UsageError('--fault-file needs one port');
  const startFault = faultFile === null ? null : startupFault(faultFile);
  if (startFault !== null) failures.set(0, startFault);
  return failures;
}

/** The engine's options from their flags; `--slow-on NAME:FACTOR` applies to the server so named. */
function engineOf(values: SimFlags): Partial<SimEngineOptions> {
  const engine: Partial<SimEngineOptions> = {};
  const set = (key: Exclude<keyof SimEngineOptions, 'priorityScheduling'>, flag: string, min: number) => {
    const value = number(values[flag as keyof typeof values] as string | undefined, `--${flag}`, min);
    if (value !== undefined) engine[key] = value;
  };
  if (values['enable-priority-scheduling']) engine.priorityScheduling = true;
  set('tokenMs', 'token-ms', 0);
  set('maxRunningRequests', 'max-running', 1);
  set('maxTotalNumTokens', 'max-total-tokens', 2);
  set('batchPenalty', 'batch-penalty', 0);
  set('defaultMaxTokens', 'max-tokens', 1);
  set('priorityPreemptionThreshold', 'priority-scheduling-preemption-threshold', 0);
  set('pageSize', 'page-size', 1);
  const slowOn = values['slow-on'];
  if (slowOn !== undefined) {
    const [name, factor] = slowOn.split(':');
    const slowdown = number(factor, '--slow-on FACTOR', 1);
    if (!name || slowdown === undefined) throw new UsageError('--slow-on needs NAME:FACTOR, e.g. gpu5:3');
    if (name === values.name) engine.slowdown = slowdown;
  }
  return engine;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = verbArgs('sim', usage, () => parseSimArgs(argv));
  if (typeof parsed === 'number') return parsed;
  const { options, quiet, exitOnFailure, faultFile } = parsed;
  const say = (line: string) => {
    if (!quiet) process.stdout.write(`${line}\n`);
  };
  // A relaunch with `> log` starts the file afresh.
  try {
    for (const o of options) {
      if (!o.logFile || o.logFile === STDOUT_LOG) continue;
      mkdirSync(dirname(o.logFile), { recursive: true });
      writeFileSync(o.logFile, '');
    }
  } catch (error) {
    process.stderr.write(`fleetgate sim: --log-dir: ${(error as Error).message}\n`);
    return 2;
  }
  const fleet = new SimFleet(options);
  for (const server of fleet.servers) {
    const log = server.options.logFile ? `, log ${server.options.logFile}` : '';
    say(`${server.name}: ${server.url} (${server.options.kind}${log})`);
    server.on('status', (status: string) => say(`${server.name}: ${status}`));
    server.on('exit', (reason: string) => say(`${server.name}: exited: ${reason}`));
  }
  fleet.start();
  const stopFaults = faultFile === null ? () => {} : onFaultSignal(faultFile, fleet.servers[0]);
  // A server hung before its port opened leaves no timer or socket: without this the process would end.
  const keepAlive = setInterval(() => {}, 2 ** 30);
  const code = await new Promise<number>((resolve) => {
    const finish = (code: number) => {
      clearInterval(keepAlive);
      stopFaults();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      resolve(code);
    };
    const onSignal = () => finish(0);
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    if (exitOnFailure) for (const server of fleet.servers) server.on('exit', () => finish(1));
  });
  say('stopping');
  await fleet.stop();
  return code;
}
