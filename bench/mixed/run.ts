/**
 * `npm run bench:mixed`: a quick request beside a batch job (issue #19). The balance bench's batch
 * job at its usual concurrency (896) and, meanwhile, an interactive client sending one short
 * streamed chat request per second; reported: the interactive requests' time to first token and the
 * job's makespan, for fleetgate with priority classes (the interactive client names its class),
 * without (one class), with `queue.reserve`, NGINX least_conn, HAProxy leastconn, and the same
 * interactive client on an idle fleet. Every proxy is warmed before the clock starts (warm-up.ts).
 * Markdown on stdout, JSON in bench/results/raw/, progress on stderr.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { engineFor, engineOptions, SCRIPT_CONCURRENCY_PER_SLOT, SERVERS, workloadSpec } from '../balance/fleet-spec.js';
import { type JobMetrics, runJob } from '../balance/job.js';
import { MODEL, makeWorkload } from '../balance/workload.js';
import {
  COMMON_OPTIONS,
  commonSettings,
  inRunOrder,
  numberFlag,
  runBench,
  settle,
  startBench,
  writeResults,
} from '../lib/cli.js';
import { LoadClient } from '../lib/load.js';
import { machineLine } from '../lib/machine.js';
import { SimHost } from '../lib/sim-control.js';
import { percentileSorted } from '../lib/stats.js';
import { startTarget, type TargetSpec } from '../lib/targets.js';
import { simCounters, warmUp } from '../lib/warm-up.js';
import {
  forkInteractiveClient,
  type InteractiveClient,
  type InteractiveOptions,
  type InteractiveResult,
  interactiveClient,
} from './interactive-client.js';
import { type MixedRecord, mixedChecks, mixedTables, summarizeRow } from './report.js';

interface MixedTarget extends TargetSpec {
  id: string;
  /** The interactive client sends `X-Fleetgate-Priority: interactive`. */
  header: boolean;
  /** No batch job: the interactive client alone. */
  idle?: boolean;
  /** The simulated servers run with SGLang's `--enable-priority-scheduling`. */
  priorityScheduling?: boolean;
  /** A row with classes: the id of the same configuration without them, for the makespan ratio. */
  without?: string;
}

const ONE_CLASS = '  classes: [batch]\n  default_class: batch\n';
const TARGETS: readonly MixedTarget[] = [
  { id: 'idle', name: 'idle fleet (fleetgate, classes)', kind: 'fleetgate', header: true, idle: true },
  {
    id: 'fleetgate-classes',
    name: 'fleetgate with classes',
    kind: 'fleetgate',
    header: true,
    without: 'fleetgate-no-classes',
  },
  {
    id: 'fleetgate-no-classes',
    name: 'fleetgate without classes',
    kind: 'fleetgate',
    header: false,
    queueYaml: ONE_CLASS,
  },
  {
    id: 'fleetgate-reserve',
    name: 'fleetgate with classes, reserve 1',
    kind: 'fleetgate',
    header: true,
    queueYaml: '  reserve: 1\n',
    without: 'fleetgate-no-classes',
  },
  {
    id: 'fleetgate-backend-priority',
    name: 'fleetgate with classes, backend_priority (SGLang priority scheduling)',
    kind: 'fleetgate',
    header: true,
    queueYaml: '  classes:\n    - {name: interactive, backend_priority: 1}\n    - {name: batch, backend_priority: 0}\n',
    priorityScheduling: true,
    without: 'fleetgate-no-classes',
  },
  {
    // A gap above SGLang's default --priority-scheduling-preemption-threshold (10): the interactive
    // request may also preempt running batch requests, which SGLang does only when the batch is full by count.
    id: 'fleetgate-backend-preemption',
    name: 'fleetgate with classes, backend_priority 100/0 (SGLang priority scheduling, preemption)',
    kind: 'fleetgate',
    header: true,
    queueYaml:
      '  classes:\n    - {name: interactive, backend_priority: 100}\n    - {name: batch, backend_priority: 0}\n',
    priorityScheduling: true,
    without: 'fleetgate-no-classes',
  },
  {
    id: 'fleetgate-slow-start',
    name: 'fleetgate with classes, cap_slow_start',
    kind: 'fleetgate',
    header: true,
    capSlowStart: true,
    without: 'fleetgate-slow-start-no-classes',
  },
  {
    id: 'fleetgate-slow-start-no-classes',
    name: 'fleetgate without classes, cap_slow_start',
    kind: 'fleetgate',
    header: false,
    queueYaml: ONE_CLASS,
    capSlowStart: true,
  },
  {
    id: 'fleetgate-slow-start-preemption',
    name: 'fleetgate with classes, cap_slow_start, backend_priority 100/0 (priority scheduling, preemption)',
    kind: 'fleetgate',
    header: true,
    capSlowStart: true,
    queueYaml:
      '  classes:\n    - {name: interactive, backend_priority: 100}\n    - {name: batch, backend_priority: 0}\n',
    priorityScheduling: true,
    without: 'fleetgate-slow-start-no-classes',
  },
  {
    // The same with a slot of every backend's cap kept for the top class: with the servers' queues
    // ordered, what an interactive request still waited for was a cap slot in fleetgate's queue.
    id: 'fleetgate-slow-start-preemption-reserve',
    name: 'fleetgate with classes, cap_slow_start, backend_priority 100/0, reserve 1 (priority scheduling, preemption)',
    kind: 'fleetgate',
    header: true,
    capSlowStart: true,
    queueYaml:
      '  reserve: 1\n  classes:\n    - {name: interactive, backend_priority: 100}\n    - {name: batch, backend_priority: 0}\n',
    priorityScheduling: true,
    without: 'fleetgate-slow-start-no-classes',
  },
  { id: 'nginx-least-conn', name: 'nginx least_conn', kind: 'nginx', balance: 'least_conn', header: false },
  { id: 'haproxy-leastconn', name: 'haproxy leastconn', kind: 'haproxy', balance: 'leastconn', header: false },
];

const usage = `usage: npm run bench:mixed -- [options]

  --runs N            repetitions (default 3; --quick: 1)
  --quick             tiny sizes, for a smoke run
  --targets LIST      ids: ${TARGETS.map((t) => t.id).join(', ')} (default all)
  --interval-ms MS    between two interactive requests (default 1000)
  --idle-requests N   interactive requests on the idle fleet (default 30)
  --interactive-tokens N  max_tokens of an interactive request (default 16)
  --interactive-in-process  run the interactive client in the bench's own process (as before), not a child
  --cpu-prof DIR      run fleetgate under node --cpu-prof, writing .cpuprofile files to DIR
  --access-log        fleetgate writes its access log (with class and queue_ms) to its log file (see --keep)
  --no-warmup         start the clock on a cold proxy (default: each proxy first serves as many one-token
                      requests at once as the job has in flight, idle row included; bench/lib/warm-up.ts)
  --proxy-cpu N / --client-cpu N / --no-pin / --out FILE / --quiet-wait SEC / --keep   as bench:balance
`;

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...COMMON_OPTIONS,
      'interval-ms': { type: 'string' },
      'idle-requests': { type: 'string' },
      'interactive-tokens': { type: 'string' },
      'interactive-in-process': { type: 'boolean' },
      'cpu-prof': { type: 'string' },
      'access-log': { type: 'boolean' },
      'no-warmup': { type: 'boolean' },
    },
  });
  if (values.help) return null;
  const wanted = (values.targets ?? TARGETS.map((t) => t.id).join(',')).split(',').map((s) => s.trim());
  for (const id of wanted) if (!TARGETS.some((t) => t.id === id)) throw new Error(`--targets: unknown target '${id}'`);
  const sizes = { quick: values.quick === true };
  const engine = engineOptions(sizes);
  const concurrency = SCRIPT_CONCURRENCY_PER_SLOT * engine.maxRunningRequests * SERVERS;
  return {
    ...commonSettings(values, 'mixed'),
    targets: TARGETS.filter((t) => wanted.includes(t.id)).map((t) =>
      values['access-log'] && t.kind === 'fleetgate' ? { ...t, accessLog: true } : t,
    ),
    intervalMs: numberFlag(values['interval-ms'], 'interval-ms', 1000),
    idleRequests: numberFlag(values['idle-requests'], 'idle-requests', sizes.quick ? 5 : 30),
    interactiveTokens: numberFlag(values['interactive-tokens'], 'interactive-tokens', 16),
    interactiveInProcess: values['interactive-in-process'] === true,
    proxyNodeArgs: values['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof']}`] : [],
    workload: workloadSpec(sizes),
    engine,
    concurrency,
    warmup: values['no-warmup'] ? 0 : concurrency,
  };
}

async function main(argv: string[]): Promise<number> {
  const start = startBench('mixed', usage, argv, parse, (o) => o.targets.map((t) => t.kind));
  if (typeof start === 'number') return start;
  const { opts, machine, work, progress } = start;
  const jobs = makeWorkload(opts.workload);
  const engines = Array.from({ length: SERVERS }, (_, i) => engineFor(opts.engine, i));
  const records: MixedRecord[] = [];
  const started = Date.now();
  const startClient = async (url: string, header: boolean, maxRequests: number): Promise<InteractiveClient> => {
    const clientOpts: InteractiveOptions = {
      intervalMs: opts.intervalMs,
      maxRequests,
      header,
      tokens: opts.interactiveTokens,
    };
    return opts.interactiveInProcess ? interactiveClient(url, clientOpts) : forkInteractiveClient(url, clientOpts);
  };
  try {
    for (let run = 1; run <= opts.runs; run++) {
      for (const spec of inRunOrder(opts.targets, run)) {
        const dir = join(work, `${run}-${spec.id}`);
        try {
          await settle(opts.quietWaitMs, progress);
          let record: MixedRecord;
          if (spec.idle) {
            mkdirSync(dir, { recursive: true });
            const sims = await SimHost.start({
              count: SERVERS,
              engine: (i) => engines[i],
              cpu: opts.clientCpu,
              logDir: dir,
            });
            try {
              const target = await startTarget(spec, {
                backends: sims.urls,
                cpu: opts.proxyCpu,
                dir: join(dir, 'proxy'),
              });
              // The same warm-up as the job's rows, so that the idle row's first request meets a warm proxy too.
              const warmUpClient = new LoadClient(target.urls, opts.concurrency);
              try {
                await warmUp(warmUpClient, opts.warmup, { model: MODEL });
                const warmedUp = (await simCounters(sims)).completed.reduce((sum, n) => sum + n, 0);
                const client = await startClient(target.urls[0], spec.header, opts.idleRequests);
                await client.finished;
                record = toRecord(run, spec, await client.stop(), warmedUp, null);
              } finally {
                await warmUpClient.close();
                await target.stop();
              }
            } finally {
              await sims.stop();
            }
          } else {
            let measured: InteractiveResult = { samples: [], loopDelayMaxMs: [] };
            const metrics = await runJob(spec, {
              servers: SERVERS,
              engine: (i) => (spec.priorityScheduling ? { ...engines[i], priorityScheduling: true } : engines[i]),
              jobs,
              concurrency: opts.concurrency,
              fault: null,
              proxyCpu: opts.proxyCpu,
              proxyNodeArgs: opts.proxyNodeArgs,
              clientCpu: opts.clientCpu,
              dir,
              deadlineMs: 10 * 60_000,
              warmup: opts.warmup,
              alongside: async (urls) => {
                const client = await startClient(urls[0], spec.header, 600);
                return {
                  stop: async () => {
                    measured = await client.stop();
                  },
                };
              },
            });
            record = toRecord(run, spec, measured, metrics.warmedUp, metrics);
          }
          records.push(record);
          const ttft = [...record.ttftMs].sort((a, b) => a - b);
          progress(
            `run ${run}/${opts.runs} ${spec.name}: interactive n=${ttft.length} TTFT p50 ${percentileSorted(ttft, 50).toFixed(0)} ms p99 ${percentileSorted(ttft, 99).toFixed(0)} ms, errors ${record.interactiveErrors}; makespan ${record.makespanSec?.toFixed(2) ?? '-'} s; first 5 s: ${firstSeconds(record)}`,
          );
        } catch (error) {
          records.push({
            run,
            target: spec.name,
            warmedUp: 0,
            ttftMs: [],
            interactiveErrors: 0,
            interactive: [],
            loopDelayMaxMs: [],
            makespanSec: null,
            batchErrors: null,
            batchErrorKinds: {},
            error: (error as Error).message,
          });
          progress(`run ${run}/${opts.runs} ${spec.name}: FAILED: ${(error as Error).message}`);
        }
      }
    }
  } finally {
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
  const summaries = opts.targets.map((t) => summarizeRow(records, t)).filter((s) => s !== null);
  const checks = mixedChecks(summaries, opts.targets);
  const report = [
    `## fleetgate mixed-workload bench (${opts.runs} run${opts.runs === 1 ? '' : 's'}; TTFT percentiles over every run's interactive requests, makespan the median)`,
    '',
    `Machine: ${machineLine(machine)}.`,
    `Batch job: bench:balance's (${jobs.length} chat requests, concurrency ${opts.concurrency}, ${SERVERS} simulated SGLang servers, max_running_requests ${opts.engine.maxRunningRequests}). Interactive: one streamed chat request (max_tokens ${opts.interactiveTokens}) every ${opts.intervalMs} ms while the job runs (${opts.idleRequests} on the idle fleet).`,
    '',
    ...mixedTables(summaries, checks),
  ].join('\n');
  process.stdout.write(report);
  writeResults(opts.out, 'mixed', started, {
    machine,
    options: { ...opts, out: undefined, targets: opts.targets.map((t) => t.id) },
    summaries,
    targets: checks,
    runs: records,
  });
  progress(`wrote ${opts.out}`);
  return records.some((r) => r.error === null) ? 0 : 1;
}

/** The interactive requests sent in the first 5 s, and the client process's worst event-loop delay then. */
function firstSeconds(record: MixedRecord): string {
  const early = record.interactive.filter((s) => s.sentMs < 5000).map((s) => s.ttftMs?.toFixed(0) ?? 'error');
  const loopMs = Math.max(0, ...record.loopDelayMaxMs.slice(0, 5));
  return `TTFT ${early.join(', ')} ms, client event-loop delay max ${loopMs.toFixed(0)} ms`;
}

function toRecord(
  run: number,
  spec: MixedTarget,
  { samples, loopDelayMaxMs }: InteractiveResult,
  warmedUp: number,
  job: JobMetrics | null,
): MixedRecord {
  const ttftMs = samples.flatMap((s) => (s.ttftMs === null ? [] : [s.ttftMs]));
  return {
    run,
    target: spec.name,
    warmedUp,
    ttftMs,
    interactiveErrors: samples.length - ttftMs.length,
    interactive: samples,
    loopDelayMaxMs,
    makespanSec: job?.makespanSec ?? null,
    batchErrors: job?.errors ?? null,
    batchErrorKinds: job?.errorKinds ?? {},
    error: null,
  };
}

runBench('bench:mixed', main);
