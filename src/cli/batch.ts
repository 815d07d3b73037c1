/**
 * `fleetgate batch INPUT.jsonl -o OUTPUT.jsonl`: runs an OpenAI Batch input file through a running
 * fleetgate (`--url`), or through one it builds in this process for the run (`--serve`/`--launch`,
 * batch-gateway.ts), resumably (OUTPUT is the ledger; docs/batch.md). Exit 0 all done, 1 some
 * requests failed for good (or fleetgate unreachable, or its backends not ready in time), 2 usage,
 * config or input error (nothing is sent).
 */
import { basename } from 'node:path';
import type { parseArgs } from 'node:util';
import { batchClassOf, ConcurrencyControl, type FleetView } from '../batch/auto-concurrency.js';
import { BatchInputError } from '../batch/batch-input.js';
import { BatchProgress } from '../batch/batch-progress.js';
import { BatchSender } from '../batch/batch-sender.js';
import { type CheckedInput, checkInputFile } from '../batch/input-file.js';
import { runLedgered } from '../batch/ledgered-run.js';
import { LedgerError } from '../batch/output-ledger.js';
import { type ProgressMode, ProgressReporter, scanReporter } from '../batch/progress-reporter.js';
import { parseDuration, parseSize } from '../config/duration.js';
import { fetchFleetStatus } from '../http/fleet-status-client.js';
import type { InProcessOptions, InProcessStart } from './batch-gateway.js';
import { DEFAULT_URL, resolveBaseUrl, UrlError } from './fleetgate-url.js';
import { parseReadyTarget } from './render-wait.js';
import { isUsageError, readFlags, UsageError } from './verb-args.js';

const usage = `usage: fleetgate batch INPUT.jsonl -o OUTPUT.jsonl [--url URL] [--concurrency auto|N] [--max-attempts N] [--no-stream-upstream] [--json-progress]
       fleetgate batch INPUT.jsonl -o OUTPUT.jsonl --serve|--launch [--config FILE] [serve options] [--ready N|all] [batch options]

Sends every request of INPUT (OpenAI Batch input: one {"custom_id", "method", "url", "body"} per line;
urls /v1/chat/completions, /v1/completions, /v1/embeddings) through fleetgate, in its batch
priority class, and writes each answer to OUTPUT (OpenAI Batch output format) as it arrives.
fleetgate is a running one (--url), or with --serve (--launch) one started in this process from the
config as \`fleetgate serve\` (\`launch\`, engines included) would start it, on a loopback port, and
stopped (engines too) when the batch ends.
OUTPUT is the ledger: run the same command again after a kill and only the custom_ids not yet in it
are sent. Requests that failed for good go to the errors file (tried again by the next run).

options:
  -o, --output FILE        the output file (required); created, or resumed when it exists
  --errors FILE            the errors file (default: OUTPUT with .errors.jsonl)
  --url URL                fleetgate's URL (default $FLEETGATE_URL, else ${DEFAULT_URL})
  --concurrency auto|N     requests in flight: auto (default) follows the fleet's ready backends, caps and queues
  --max-attempts N         tries of a request that got a 5xx or a cut answer (default 3); a 4xx is not retried
  --timeout DUR            longest wait for one answer (default 30m)
  --max-input-size SIZE    largest INPUT accepted (default: no limit; INPUT is read as a stream)
  --api-key KEY            sent as Authorization: Bearer KEY (default $FLEETGATE_API_KEY; in-process, the config's first auth.api_keys)
  --no-stream-upstream     send chat/completions lines non-streamed (default: streamed upstream and assembled
                           into the non-streamed answer, so fleetgate resumes an answer whose engine died)
  --json-progress          progress as JSON lines on stdout (default: a bar on a terminal, else a line every 30 s on stderr)
  -h, --help               this text

in-process fleetgate (instead of --url):
  --serve                  start fleetgate here, as \`fleetgate serve\` with the same config flags would
  --launch                 the same, starting and supervising the engines of the config's launch: section
  --config FILE, --backend URL, --listen HOST:PORT, --log-level LEVEL, --set key.path=value
                           as for \`fleetgate serve\`; defaults here: listen 127.0.0.1:0, log.level warn on
                           stderr, no access log, batch.enabled false
  --ready N|all            backends ready before the first request (default: the config's min_ready, at least 1);
                           auto concurrency follows the ones that turn ready later
  --ready-timeout DUR      give up (exit 1, nothing sent) when they are not ready by then (default 30m)

exit status: 0 every request answered, 1 some failed for good (count printed), fleetgate unreachable or
its backends not ready in time, 2 usage, config or input error (bad JSONL names the line; nothing is sent),
130 stopped by SIGINT/SIGTERM (run the same command again to resume)
`;

interface BatchArgs {
  input: string;
  output: string;
  errors: string;
  /** A running fleetgate; null with `gateway`. */
  url: URL | null;
  concurrency: number | null;
  maxAttempts: number;
  timeoutMs: number;
  /** Null: no limit. */
  maxInputSize: number | null;
  apiKey: string | null;
  jsonProgress: boolean;
  /** Chat/completions lines go upstream streamed (assembled back); false with `--no-stream-upstream`. */
  streamUpstream: boolean;
  /** `--serve`/`--launch`: the fleetgate built in this process; null: the one at `url`. */
  gateway: Omit<InProcessOptions, 'signal'> | null;
}

/** `fleetgate serve`'s config flags, passed on in order to the in-process gateway. */
const GATEWAY_FLAGS = ['config', 'backend', 'listen', 'log-level', 'set'];
const DEFAULT_READY_TIMEOUT = '30m';

function positiveInteger(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1)
    throw new UsageError(`${flag} must be an integer >= 1, got '${value}'`);
  return n;
}

export function defaultErrorsPath(output: string): string {
  return output.endsWith('.jsonl') ? `${output.slice(0, -'.jsonl'.length)}.errors.jsonl` : `${output}.errors.jsonl`;
}

function parseBatchArgs(argv: string[]): BatchArgs | 'help' {
  const { values, positionals, tokens } = readFlags(
    argv,
    {
      output: { type: 'string', short: 'o' },
      errors: { type: 'string' },
      url: { type: 'string' },
      concurrency: { type: 'string', default: 'auto' },
      'max-attempts': { type: 'string', default: '3' },
      timeout: { type: 'string', default: '30m' },
      'max-input-size': { type: 'string' },
      'api-key': { type: 'string' },
      'json-progress': { type: 'boolean', default: false },
      'no-stream-upstream': { type: 'boolean', default: false },
      serve: { type: 'boolean', default: false },
      launch: { type: 'boolean', default: false },
      config: { type: 'string' },
      backend: { type: 'string', multiple: true },
      listen: { type: 'string' },
      'log-level': { type: 'string' },
      set: { type: 'string', multiple: true },
      ready: { type: 'string' },
      'ready-timeout': { type: 'string' },
    },
    true,
  );
  if (values.help) return 'help';
  if (positionals.length !== 1) throw new UsageError('give exactly one INPUT.jsonl');
  if (values.output === undefined) throw new UsageError('-o OUTPUT.jsonl is required');
  const timeoutMs = parseDuration(values.timeout);
  if (timeoutMs === null || timeoutMs <= 0)
    throw new UsageError(`--timeout must be a duration such as 10m, got '${values.timeout}'`);
  const maxInputSize = values['max-input-size'] === undefined ? null : parseSize(values['max-input-size']);
  if (values['max-input-size'] !== undefined && (maxInputSize === null || maxInputSize <= 0))
    throw new UsageError(`--max-input-size must be a size such as 200MiB, got '${values['max-input-size']}'`);
  if (positionals[0] === values.output) throw new UsageError('INPUT and OUTPUT are the same file');
  const gateway = gatewayArgs(values, tokens);
  return {
    input: positionals[0],
    output: values.output,
    errors: values.errors ?? defaultErrorsPath(values.output),
    url: gateway === null ? resolveBaseUrl(values.url) : null,
    concurrency: values.concurrency === 'auto' ? null : positiveInteger(values.concurrency, '--concurrency'),
    maxAttempts: positiveInteger(values['max-attempts'], '--max-attempts'),
    timeoutMs,
    maxInputSize,
    apiKey: values['api-key'] ?? (process.env.FLEETGATE_API_KEY || null),
    jsonProgress: values['json-progress'],
    streamUpstream: !values['no-stream-upstream'],
    gateway,
  };
}

type GatewayValues = {
  serve: boolean;
  launch: boolean;
  url?: string;
  ready?: string;
  'ready-timeout'?: string;
};
type Token = ReturnType<typeof parseArgs>['tokens'] extends (infer T)[] | undefined ? T : never;

/** `--serve`/`--launch` and the serve flags that go with them; null without either. */
function gatewayArgs(values: GatewayValues, tokens: Token[]): BatchArgs['gateway'] {
  const passed = tokens.filter(
    (t): t is Extract<Token, { kind: 'option' }> => t.kind === 'option' && GATEWAY_FLAGS.includes(t.name),
  );
  if (values.serve && values.launch) throw new UsageError('give --serve or --launch, not both');
  if (!values.serve && !values.launch) {
    const stray = tokens.find(
      (t) => t.kind === 'option' && [...GATEWAY_FLAGS, 'ready', 'ready-timeout'].includes(t.name),
    );
    if (stray?.kind === 'option') throw new UsageError(`${stray.rawName} needs --serve or --launch`);
    return null;
  }
  if (values.url !== undefined) throw new UsageError('--url is for a running fleetgate: drop it, or --serve/--launch');
  const ready = values.ready === undefined ? null : parseReadyTarget(values.ready);
  if (ready === null && values.ready !== undefined)
    throw new UsageError(`--ready must be a positive whole number or 'all', got '${values.ready}'`);
  const timeoutText = values['ready-timeout'] ?? DEFAULT_READY_TIMEOUT;
  const readyTimeoutMs = parseDuration(timeoutText);
  if (readyTimeoutMs === null || readyTimeoutMs <= 0)
    throw new UsageError(`--ready-timeout must be a duration such as 10m, got '${timeoutText}'`);
  return {
    mode: values.serve ? 'serve' : 'launch',
    argv: passed.flatMap((t) => [t.rawName, t.value ?? '']),
    ready,
    readyTimeoutMs,
  };
}

function progressMode(args: BatchArgs): ProgressMode {
  return args.jsonProgress ? 'json' : process.stderr.isTTY ? 'tty' : 'plain';
}

function progressOut(args: BatchArgs): NodeJS.WritableStream {
  return args.jsonProgress ? process.stdout : process.stderr;
}

/** INPUT checked whole, as a stream, before anything starts. */
async function checkInput(args: BatchArgs): Promise<CheckedInput> {
  try {
    return await checkInputFile(args.input, {
      maxBytes: args.maxInputSize,
      progress: scanReporter(progressOut(args), progressMode(args), {
        verb: 'checking',
        file: basename(args.input),
        noun: 'requests',
      }),
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === undefined) throw error;
    throw new UsageError(`cannot read ${args.input}: ${code}`);
  }
}

export async function run(argv: string[]): Promise<number> {
  let args: BatchArgs;
  let input: CheckedInput;
  let inputName = 'INPUT';
  try {
    const parsed = parseBatchArgs(argv);
    if (parsed === 'help') {
      process.stdout.write(usage);
      return 0;
    }
    args = parsed;
    inputName = args.input;
    input = await checkInput(args);
  } catch (error) {
    if (error instanceof BatchInputError) {
      process.stderr.write(`fleetgate batch: ${inputName}: ${error.message}\n`);
      process.stderr.write('nothing was sent\n');
      return 2;
    }
    if (isUsageError(error) || error instanceof UrlError) {
      process.stderr.write(`fleetgate batch: ${(error as Error).message}\n\n${usage}`);
      return 2;
    }
    throw error;
  }
  if (args.url !== null) return runBatchCommand(args, args.url, input);
  if (args.gateway === null) throw new Error('neither --url nor an in-process fleetgate');
  return runInProcess(args, args.gateway, input);
}

/** `--serve`/`--launch`: the batch through a fleetgate of its own, stopped (engines too) at the end. */
async function runInProcess(
  args: BatchArgs,
  gateway: NonNullable<BatchArgs['gateway']>,
  input: CheckedInput,
): Promise<number> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let started: InProcessStart;
  try {
    // Loaded only here: the gateway's modules would cost a `--url` batch ~20 MB of its resident memory.
    const { startInProcess } = await import('./batch-gateway.js');
    started = await startInProcess({ ...gateway, signal: stop.signal });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (!started.ok) {
    process.stderr.write(`${started.message}\n`);
    return started.code;
  }
  try {
    return await runBatchCommand({ ...args, apiKey: args.apiKey ?? started.apiKey }, started.url, input);
  } finally {
    await started.stop();
  }
}

async function runBatchCommand(args: BatchArgs, url: URL, input: CheckedInput): Promise<number> {
  const control = new ConcurrencyControl({
    fixed: args.concurrency,
    fetchStatus: () => fetchFleetStatus<FleetView>(url),
  });
  await control.poll();
  if (control.view === null) {
    process.stderr.write(
      `fleetgate batch: cannot read ${new URL('fleet/status', url)}: is fleetgate running there? (nothing was sent)\n`,
    );
    return 1;
  }
  await control.start();
  const sender = new BatchSender({
    base: url,
    priorityClass: batchClassOf(control.view),
    apiKey: args.apiKey,
    timeoutMs: args.timeoutMs,
    connections: 4096,
    streamUpstream: args.streamUpstream,
  });
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let progress: BatchProgress | null = null;
  let reporter: ProgressReporter | null = null;
  const mode = progressMode(args);
  const fleetTick = setInterval(() => {
    const view = control.view;
    if (view) progress?.fleet(view.ready, view.total);
  }, 500);
  fleetTick.unref();
  try {
    const result = await runLedgered({
      input,
      outputPath: args.output,
      errorsPath: args.errors,
      send: sender.send,
      limit: control.limit,
      maxAttempts: args.maxAttempts,
      signal: stop.signal,
      reading: scanReporter(progressOut(args), mode, { verb: 'reading', file: basename(args.output), noun: 'answers' }),
      resumed: (done, dropped) => {
        if (done > 0 || dropped > 0) {
          const torn = dropped > 0 ? `; dropped a torn last line of ${dropped} bytes` : '';
          process.stderr.write(
            `fleetgate batch: resuming ${args.output}: ${done} of ${input.requests} already written${torn}\n`,
          );
        }
        progress = new BatchProgress(input.requests, done);
        const view = control.view;
        if (view) progress.fleet(view.ready, view.total);
        reporter = new ProgressReporter(progress, progressOut(args), mode);
        reporter.start();
      },
      observe: (event) => {
        if (event.type === 'completed') progress?.completed(event.tokens);
        else if (event.type === 'failed') progress?.failed();
        else progress?.retried();
      },
    });
    (reporter as ProgressReporter | null)?.stop();
    if (stop.signal.aborted) {
      process.stderr.write(
        `fleetgate batch: stopped; ${result.abandoned} not done: run the same command again to resume\n`,
      );
      return 130;
    }
    const done = result.alreadyDone + result.completed;
    if (result.failed > 0) {
      process.stderr.write(
        `fleetgate batch: ${result.failed} of ${result.total} requests failed for good: see ${args.errors}\n`,
      );
      return 1;
    }
    if (!args.jsonProgress)
      process.stderr.write(`fleetgate batch: ${done}/${result.total} done, written to ${args.output}\n`);
    return 0;
  } catch (error) {
    if (error instanceof LedgerError) {
      process.stderr.write(`fleetgate batch: ${error.message} (nothing was sent)\n`);
      return 2;
    }
    if (error instanceof BatchInputError) {
      // INPUT changed under the run: what was written stays, a run again checks it anew.
      process.stderr.write(`fleetgate batch: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    clearInterval(fleetTick);
    control.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await sender.close();
  }
}
