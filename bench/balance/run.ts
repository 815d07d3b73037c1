/**
 * `npm run bench:balance`: which balancer finishes a batch-generation job first. Seven simulated
 * SGLang servers with continuous batching and a KV-cache pool (one 30% slower), a job with
 * heavy-tailed answer lengths sent at fixed concurrency through one URL, and every balancer on a
 * fresh set of servers. `--fault`: one server starts late, one crashes mid-run and comes back.
 * `--fault-kind scheduler-dead`: one server's scheduler dies mid-run with HTTP up and `/health` 200.
 * Markdown table on stdout, JSON in bench/results/raw/, progress on stderr.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
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
import { machineLine } from '../lib/machine.js';
import {
  engineFor,
  engineOptions,
  type JobSizes,
  SCRIPT_CONCURRENCY_PER_SLOT,
  SERVERS,
  SLOW_INDEX,
  SLOWDOWN,
  workloadSpec,
} from './fleet-spec.js';
import { type FaultPlan, runJob, type SchedulerDeadPlan } from './job.js';
import { renderReplicaFigures, replicaFigures } from './replica-checks.js';
import {
  type BalanceRecord,
  checkTargets,
  eachAgainstTheOthers,
  renderChecks,
  renderSchedulerDeadTable,
  renderTable,
  summarize,
  type TargetSummary,
} from './report.js';
import { BALANCE_TARGETS, selectTargets } from './targets.js';
import { lowerBound, makeWorkload } from './workload.js';

const usage = `usage: npm run bench:balance -- [options]

  --runs N              repetitions (default 3; --quick: 1)
  --quick               tiny sizes, for a smoke run
  --fault               one server starts late, one crashes mid-run and is relaunched
 --stream              streamed requests (stream_options.include_usage): a stream cut by the crash is
                        an error unless it is resumed (fleetgate-no-resume: the same with resume off);
                        reports tokens generated upstream that never reached the client
  --fault-kind KIND     crash (= --fault) or scheduler-dead: gpu2's scheduler dies when 35% of the
                        job is done; its HTTP stays up and /health answers 200 (SGLang v0.4), no log
                        configured; the client has a per-request and a run time limit
  --request-timeout SEC scheduler-dead: the client aborts a request after SEC (default 120)
  --run-timeout SEC     scheduler-dead: no request starts after SEC, in-flight ones are aborted
                        then (default 300)
  --targets LIST        ids or prefixes: ${BALANCE_TARGETS.map((t) => t.id).join(', ')} (default all)
  --requests N          requests in the job (default 3000)
  --concurrency N       requests in flight (default 4x the fleet's batch slots: 896 = 128 per
                        server, as a script pushing a large job keeps more in flight than the
                        fleet runs; 224 = the slots exactly, where least-connections balancers tie)
  --token-ms MS         decode step at batch 1 (default 6; Node timers have 1 ms resolution, so much
                        smaller steps would erase the slow server's 30%)
  --max-running N       max_running_requests per server (default 32)
  --kv-tokens N         max_total_num_tokens per server (default 10000: KV pressure at 32 running;
                        100000 for a run without KV pressure)
  --max-tokens N        max_tokens of every request (default 1400; answers stop on their own before it)
  --seed N              workload seed (default 7)
  --proxy-cpu N / --client-cpu N / --no-pin   core pinning (default 0 / 1)
  --out FILE            JSON results (default bench/results/raw/balance[-fault]-<date>.json)
  --quiet-wait SEC      before each measurement, wait up to SEC for other load to settle (default 20; --quick: 0)
  --keep                keep the work directory
`;

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...COMMON_OPTIONS,
      fault: { type: 'boolean' },
      stream: { type: 'boolean' },
      'fault-kind': { type: 'string' },
      'request-timeout': { type: 'string' },
      'run-timeout': { type: 'string' },
      requests: { type: 'string' },
      concurrency: { type: 'string' },
      'token-ms': { type: 'string' },
      'max-running': { type: 'string' },
      'kv-tokens': { type: 'string' },
      'max-tokens': { type: 'string' },
      seed: { type: 'string' },
    },
  });
  if (values.help) return null;
  const num = (text: string | undefined, flag: string, fallback: number, min = 1) =>
    numberFlag(text, flag, fallback, min, true);
  /** A sizing flag when given; absent ones keep fleet-spec.ts's defaults. */
  const given = (flag: 'requests' | 'seed' | 'max-running' | 'max-tokens' | 'kv-tokens' | 'token-ms', min = 1) =>
    values[flag] === undefined ? undefined : num(values[flag], flag, 0, min);
  const quick = values.quick === true;
  const sizes: JobSizes = {
    quick,
    requests: given('requests'),
    seed: given('seed', 0),
    maxRunning: given('max-running'),
    maxTokens: given('max-tokens'),
    kvTokens: given('kv-tokens', 2),
    tokenMs: given('token-ms', 0),
    stream: values.stream === true,
  };
  const workload = workloadSpec(sizes);
  const engine = engineOptions(sizes);
  const maxRunning = engine.maxRunningRequests;
  const kind = values['fault-kind'] ?? (values.fault ? 'crash' : undefined);
  if (kind !== undefined && kind !== 'crash' && kind !== 'scheduler-dead') {
    throw new Error(`--fault-kind: expected crash or scheduler-dead, got '${kind}'`);
  }
  const schedulerDead: SchedulerDeadPlan | null = kind === 'scheduler-dead' ? { index: 2, atShare: 0.35 } : null;
  const fault: FaultPlan | null =
    kind === 'crash'
      ? {
          lateIndex: 5,
          lateMs: quick ? 300 : 2000,
          crashIndex: 2,
          crashAtShare: 0.35,
          restartAfterMs: quick ? 300 : 1000,
        }
      : null;
  const resultName =
    kind === 'scheduler-dead'
      ? 'balance-scheduler-dead'
      : `balance${fault ? '-fault' : ''}${values.stream ? '-stream' : ''}`;
  return {
    ...commonSettings(values, resultName),
    resultName,
    schedulerDead,
    requestTimeoutMs: num(values['request-timeout'], 'request-timeout', 120) * 1000,
    runTimeoutMs: num(values['run-timeout'], 'run-timeout', 300) * 1000,
    targets: selectTargets(
      values.targets ??
        BALANCE_TARGETS.filter((t) => !t.optIn)
          .map((t) => t.id)
          .join(','),
    ),
    concurrency: num(values.concurrency, 'concurrency', SCRIPT_CONCURRENCY_PER_SLOT * maxRunning * SERVERS),
    workload,
    engine,
    fault,
  };
}

async function main(argv: string[]): Promise<number> {
  const start = startBench('balance', usage, argv, parse, (o) => o.targets.map((t) => t.kind));
  if (typeof start === 'number') return start;
  const { opts, machine, work, progress } = start;
  const jobs = makeWorkload(opts.workload);
  const engines = Array.from({ length: SERVERS }, (_, i) => engineFor(opts.engine, i));
  const lb = lowerBound(jobs, engines);
  const lengths = jobs.map((j) => j.outputTokens).sort((a, b) => a - b);
  const q = (p: number) => lengths[Math.min(lengths.length - 1, Math.floor(p * lengths.length))];
  const workloadLine =
    `${jobs.length} chat requests, max_tokens ${opts.workload.maxTokens}, answer lengths p50 ${q(0.5)} / p90 ${q(0.9)} / p99 ${q(0.99)} / max ${lengths[lengths.length - 1]} tokens ` +
    `(${Math.round(opts.workload.longShare * 100)}% in a log-normal "thinking" tail), seed ${opts.workload.seed}, concurrency ${opts.concurrency}`;
  progress(`${workloadLine}; lower bound ${lb.seconds.toFixed(2)} s`);
  const records: BalanceRecord[] = [];
  const started = Date.now();
  try {
    for (let run = 1; run <= opts.runs; run++) {
      for (const spec of inRunOrder(opts.targets, run)) {
        const label = `run ${run}/${opts.runs} ${spec.name}`;
        try {
          await settle(opts.quietWaitMs, progress);
          const metrics = await runJob(spec, {
            servers: SERVERS,
            engine: (i) => engines[i],
            jobs,
            concurrency: opts.concurrency,
            fault: opts.fault,
            ...(opts.schedulerDead && {
              schedulerDead: opts.schedulerDead,
              requestTimeoutMs: opts.requestTimeoutMs,
              graceMs: 0,
            }),
            proxyCpu: opts.proxyCpu,
            clientCpu: opts.clientCpu,
            dir: join(work, `${run}-${spec.id}`),
            replicas: spec.replicas,
            deadlineMs: opts.schedulerDead ? opts.runTimeoutMs : Math.max(60_000, lb.seconds * 1000 * 10),
          });
          records.push({ run, target: spec.name, metrics, error: null });
          const wasted = opts.workload.stream
            ? `, tokens generated ${metrics.generatedTokens}, in whole answers ${metrics.deliveredTokens}, thrown away ${metrics.generatedTokens - metrics.deliveredTokens}`
            : '';
          progress(
            `${label}: makespan ${metrics.makespanSec.toFixed(2)} s, p99 ${metrics.p99Sec.toFixed(2)} s, retractions ${metrics.retractions}, errors ${metrics.errors} ${JSON.stringify(metrics.errorKinds)}, never completed ${metrics.neverCompleted}, completed ${metrics.completed.join('/')}${wasted}`,
          );
        } catch (error) {
          const message = (error as Error).message;
          records.push({ run, target: spec.name, metrics: null, error: message });
          progress(`${label}: FAILED: ${message}`);
        }
      }
    }
  } finally {
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
  const summaries = opts.targets
    .map((t) => summarize(records, t.name, lb.seconds))
    .filter((s): s is TargetSummary => s !== null);
  const fleetgateNames = opts.targets.filter((t) => t.kind === 'fleetgate').map((t) => t.name);
  const checks = checkTargets(records, opts.fault !== null, fleetgateNames, lb.kvPressure);
  const dead = opts.schedulerDead;
  const symmetric = opts.fault || dead ? null : eachAgainstTheOthers(records);
  const e = opts.engine;
  const faultLine = opts.fault
    ? `Faults: gpu${opts.fault.lateIndex} starts ${opts.fault.lateMs} ms after the job; gpu${opts.fault.crashIndex} crashes (port closed, connections dropped) when ${Math.round(opts.fault.crashAtShare * 100)}% of the requests are done and is relaunched ${opts.fault.restartAfterMs} ms later. Errors are what the client saw (no client retries).`
    : dead
      ? `Fault: gpu${dead.index}'s scheduler dies when ${Math.round(dead.atShare * 100)}% of the requests are done; its HTTP server stays up, \`/health\` answers 200 (SGLang v0.4 servers), no log configured. The client aborts a request after ${opts.requestTimeoutMs / 1000} s and the run after ${opts.runTimeoutMs / 1000} s (no client retries). fleetgate runs with its defaults (\`health.progress_timeout\` 60 s).`
      : '';
  const replicas = replicaFigures(records);
  const replicaSection =
    replicas.makespanRatio === null && replicas.capRuns.length === 0 ? [] : [renderReplicaFigures(replicas), ''];
  const variant = opts.fault ? ' (fault variant)' : dead ? ' (scheduler-dead variant)' : '';
  const report = [
    `## fleetgate balance bench${variant} (medians of ${opts.runs} run${opts.runs === 1 ? '' : 's'})`,
    '',
    `Machine: ${machineLine(machine)}. Balancer pinned to core ${opts.proxyCpu ?? '-'}, servers and client to core ${opts.clientCpu ?? '-'}.`,
    `Servers: ${SERVERS} simulated SGLang, tokenMs ${e.tokenMs}, max_running_requests ${e.maxRunningRequests}, max_total_num_tokens ${e.maxTotalNumTokens}, batchPenalty ${e.batchPenalty}, prefill ${e.prefillTokensPerMs} tokens/ms; gpu${SLOW_INDEX} (*) is ${SLOWDOWN}x slower. A fresh set of servers for every target and run.`,
    `Job: ${workloadLine}.`,
    faultLine,
    `KV pressure: ${lb.kvPressure ? 'yes' : 'no'}: a full batch of ${e.maxRunningRequests} holds about ${Math.round(lb.kvDemandAtFullBatch)} KV tokens on average against a pool of ${e.maxTotalNumTokens}.`,
    `Lower bound: ${lb.seconds.toFixed(2)} s. ${lb.formula}`,
    '',
    renderTable(summaries, records, SLOW_INDEX),
    '',
    ...(dead
      ? [
          renderSchedulerDeadTable(
            records,
            opts.targets.map((t) => t.name),
          ),
          '',
        ]
      : ['### issue #7 targets', '', renderChecks(checks), '']),
    ...replicaSection,
    ...(symmetric === null
      ? []
      : [
          'The same measure for each of the three least-connections balancers against the other two (a balancer that only ties scores above 1x: the faster of two noisy runs beats a third one):',
          '',
          symmetric,
          '',
        ]),
  ]
    .filter((line, i, all) => line !== '' || all[i - 1] !== '')
    .join('\n');
  process.stdout.write(report);
  writeResults(opts.out, opts.resultName, started, {
    machine,
    options: { ...opts, out: undefined, targets: opts.targets.map((t) => t.id) },
    lowerBound: lb,
    summaries,
    targets: checks,
    replicas,
    runs: records,
  });
  progress(`wrote ${opts.out}`);
  return records.some((r) => r.metrics !== null) ? 0 : 1;
}

runBench('bench:balance', main);
