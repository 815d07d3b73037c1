/**
 * `npm run bench:thinking` (issue #52): thinking mode end to end.
 *
 * - job: 4 simulated thinking engines (`fleetgate sim --model-path <packaged Qwen3> --reasoning-parser
 *   qwen3`, one process each), fleetgate in front with the model known (`model.dir`), and a
 *   `fleetgate batch` job of chat requests of 1-4k output tokens; at half the job one engine is
 *   `kill -9`ed. Client-visible errors, output lines and duplicates, the tokens all engines generated
 *   over the tokens in the output; once with the batch streaming upstream (the default, resumed
 *   token-exact) and once with `--no-stream-upstream` (each in-flight answer generated again).
 * - tokenizer: CPU µs of a token-exact resume's tokenPlan on a 1 KB and an 8 KB chat.
 * - latency: time from the cut to the first continuation byte, token-exact mid-reasoning vs text.
 * - cpu: fleetgate's CPU per request with a model configured vs without, nothing cut: bench:overhead's
 *   side-by-side scenarios (a-cpu, b-cpu) on the two targets.
 *
 * A markdown table on stdout, progress on stderr, JSON in bench/results/raw/thinking-<stamp>.json.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { packagedQwen3Dir } from '../../src/model/chat-model.js';
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
import { SimHost } from '../lib/sim-control.js';
import { median } from '../lib/stats.js';
import { fmt, markdownTable, pct, times } from '../lib/table.js';
import { type RunningTarget, startTarget, type TargetSpec } from '../lib/targets.js';
import type { Metrics } from '../overhead/scenarios.js';
import { FULL as OVERHEAD_FULL, QUICK as OVERHEAD_QUICK, SCENARIOS, type Sizes } from '../overhead/scenarios.js';
import { startFleet } from './engines.js';
import { type JobResult, type JobSizes, runJob, writeInput } from './job.js';
import { type LatencyArm, measureResumeLatency } from './resume-latency.js';
import { measureTokenizerCost, type TokenizerCost } from './tokenizer-cost.js';

const PARTS = ['job', 'tokenizer', 'latency', 'cpu'] as const;
type Part = (typeof PARTS)[number];

const FULL = {
  engines: 4,
  requests: 4000,
  len: [1000, 4000] as const,
  think: [700, 990] as const,
  maxRunning: 128,
  maxSeconds: 2400,
  samples: 10,
  cpuRequests: 10_000,
};
const QUICK = {
  engines: 2,
  requests: 24,
  len: [100, 200] as const,
  think: [40, 90] as const,
  maxRunning: 16,
  maxSeconds: 90,
  samples: 1,
  cpuRequests: OVERHEAD_QUICK.requests,
};

const usage = `usage: npm run bench:thinking -- [options]

  --parts LIST          job,tokenizer,latency,cpu (default all)
  --quick               tiny sizes, for a smoke run
job (a fleetgate batch job, one engine killed at --kill-at of its lines):
  --requests N          chat requests (default ${FULL.requests}; --quick ${QUICK.requests})
  --engines N           simulated thinking engines (default ${FULL.engines}; --quick ${QUICK.engines})
  --len MIN-MAX         output tokens per answer, reasoning included (default ${FULL.len.join('-')})
  --think-tokens MIN-MAX  reasoning tokens per answer (default ${FULL.think.join('-')})
  --token-ms MS         decode step (default 5)
  --max-running N       batch slots per engine (default ${FULL.maxRunning})
  --kill-at F           share of output lines at which gpu0 is killed (default 0.5)
  --arms LIST           stream,no-stream (default both)
  --max-seconds S       give up a batch after S seconds (default ${FULL.maxSeconds})
  --seed N              the job's lengths and prompts (default 1)
latency:
  --samples N           cut streams per kind (default ${FULL.samples}; --quick ${QUICK.samples})
cpu (bench:overhead's a-cpu and b-cpu, fleetgate and fleetgate-model side by side):
  --runs N              repetitions (default 3; --quick 1); the job runs once per arm
  --cpu-requests N      a-cpu requests per run (default ${FULL.cpuRequests})
common:
  --proxy-cpu N / --client-cpu N / --no-pin   cores (fleetgate on the proxy core; the job's engines and
                        batch client are not pinned)
  --out FILE            JSON results (default bench/results/raw/thinking-<date>.json)
  --quiet-wait SEC      before each CPU measurement, wait up to SEC for other load to settle (default 20)
  --keep                keep the work directory (configs, logs, the job's input and outputs)
`;

function range(text: string | undefined, flag: string, fallback: readonly [number, number]): [number, number] {
  if (text === undefined) return [...fallback];
  const match = /^(\d+)-(\d+)$/.exec(text);
  if (!match || Number(match[1]) > Number(match[2])) throw new Error(`--${flag}: '${text}' must be MIN-MAX`);
  return [Number(match[1]), Number(match[2])];
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...COMMON_OPTIONS,
      parts: { type: 'string' },
      requests: { type: 'string' },
      engines: { type: 'string' },
      len: { type: 'string' },
      'think-tokens': { type: 'string' },
      'token-ms': { type: 'string' },
      'max-running': { type: 'string' },
      'kill-at': { type: 'string' },
      arms: { type: 'string' },
      'max-seconds': { type: 'string' },
      seed: { type: 'string' },
      samples: { type: 'string' },
      'cpu-requests': { type: 'string' },
    },
  });
  if (values.help) return null;
  const base = values.quick ? QUICK : FULL;
  const parts = (values.parts ?? PARTS.join(',')).split(',').map((p) => p.trim()) as Part[];
  for (const p of parts) if (!PARTS.includes(p)) throw new Error(`--parts: unknown part '${p}' (${PARTS.join(', ')})`);
  const arms = (values.arms ?? 'stream,no-stream').split(',').map((a) => a.trim());
  for (const a of arms) if (a !== 'stream' && a !== 'no-stream') throw new Error(`--arms: unknown arm '${a}'`);
  const killAt = numberFlag(values['kill-at'], 'kill-at', 0.5, 0, true);
  if (killAt >= 1) throw new Error('--kill-at must be below 1');
  const job: JobSizes = {
    engines: numberFlag(values.engines, 'engines', base.engines, 2),
    requests: numberFlag(values.requests, 'requests', base.requests),
    len: range(values.len, 'len', base.len),
    killAt,
    maxSeconds: numberFlag(values['max-seconds'], 'max-seconds', base.maxSeconds),
    seed: numberFlag(values.seed, 'seed', 1, 0),
  };
  const overhead = values.quick ? OVERHEAD_QUICK : OVERHEAD_FULL;
  const cpuSizes: Sizes = {
    ...overhead,
    requests: numberFlag(values['cpu-requests'], 'cpu-requests', base.cpuRequests),
  };
  return {
    ...commonSettings(values, 'thinking'),
    parts,
    streamArms: arms.map((a) => a === 'stream'),
    job,
    think: range(values['think-tokens'], 'think-tokens', base.think),
    tokenMs: numberFlag(values['token-ms'], 'token-ms', 5, 0),
    maxRunning: numberFlag(values['max-running'], 'max-running', base.maxRunning),
    samples: numberFlag(values.samples, 'samples', base.samples),
    cpuSizes,
  };
}

type Options = NonNullable<ReturnType<typeof parse>>;

const CPU_TARGETS = (modelDir: string): TargetSpec[] => [
  { name: 'fleetgate', kind: 'fleetgate' },
  { name: 'fleetgate-model', kind: 'fleetgate', extraYaml: `model:\n  dir: ${modelDir}\n` },
];

interface CpuRun {
  run: number;
  scenario: 'a-cpu' | 'b-cpu';
  metrics: Record<string, Metrics>;
  ratio: number;
}

/** bench:overhead's side-by-side scenarios on fleetgate with and without `model.dir`: CPU ratios within each run. */
async function measureCpu(opts: Options, work: string, modelDir: string, progress: (l: string) => void) {
  const runs: CpuRun[] = [];
  for (const id of ['a-cpu', 'b-cpu'] as const) {
    const scenario = SCENARIOS[id];
    if (!scenario.together) throw new Error(`${id} is not a side-by-side scenario`);
    const metric = id === 'a-cpu' ? 'cpuPer1kReq' : 'cpuPer100kChunks';
    const sims = await SimHost.start({
      count: opts.cpuSizes.backends,
      engine: () => scenario.engine(opts.cpuSizes),
      cpu: opts.clientCpu,
      logDir: work,
    });
    try {
      for (let run = 1; run <= opts.runs; run++) {
        const specs = inRunOrder(CPU_TARGETS(modelDir), run);
        const targets: RunningTarget[] = [];
        try {
          await settle(opts.quietWaitMs, progress);
          for (const spec of specs) {
            targets.push(
              await startTarget(spec, {
                backends: sims.urls,
                cpu: opts.proxyCpu,
                dir: join(work, `cpu-${id}-${run}-${spec.name}`),
              }),
            );
          }
          const metrics = await scenario.run(targets, sims, opts.cpuSizes);
          const byName = Object.fromEntries(specs.map((spec, i) => [spec.name, metrics[i]]));
          const ratio = byName['fleetgate-model'][metric] / byName.fleetgate[metric];
          runs.push({ run, scenario: id, metrics: byName, ratio });
          progress(`cpu ${id} run ${run}/${opts.runs}: fleetgate-model / fleetgate ${metric} = ${ratio.toFixed(3)}`);
        } finally {
          await Promise.all(targets.map((t) => t.stop()));
        }
      }
    } finally {
      await sims.stop();
    }
  }
  const summary = (['a-cpu', 'b-cpu'] as const).map((scenario) => {
    const mine = runs.filter((r) => r.scenario === scenario);
    const metric = scenario === 'a-cpu' ? 'cpuPer1kReq' : 'cpuPer100kChunks';
    return {
      scenario,
      metric,
      fleetgate: median(mine.map((r) => r.metrics.fleetgate[metric])),
      fleetgateModel: median(mine.map((r) => r.metrics['fleetgate-model'][metric])),
      ratio: median(mine.map((r) => r.ratio)),
      runs: mine.length,
    };
  });
  return { summary, runs };
}

type CpuSummary = Awaited<ReturnType<typeof measureCpu>>['summary'];

function jobTable(jobs: JobResult[]): string {
  return markdownTable(
    [
      'batch',
      'wall s',
      'client errors',
      'lines / unique / missing',
      'output tokens',
      'reasoning share',
      'generated tokens',
      'generated / output',
      'killed engine: running, gap ms',
      'resumes (refused: why)',
      'fleetgate CPU s',
    ],
    jobs.map((j) => [
      j.arm,
      fmt(j.wallSec, 0),
      String(j.clientErrors),
      `${j.output.lines} / ${j.output.uniqueIds} / ${j.output.missing}`,
      fmt(j.output.completionTokens, 0),
      pct(j.reasoningShare),
      fmt(j.generated, 0),
      `${times(j.generatedOverOutput, 3)} (≤ ${times(j.generatedOverOutputUpper, 3)})`,
      j.kill ? `${j.kill.runningAtKill}, ${fmt(j.kill.readToKillMs, 1)}` : 'no kill',
      `${j.resumes} (${j.resumeFailures}${reasons(j.failuresByReason)})`,
      fmt(j.fleetgateCpuSec, 1),
    ]),
  );
}

function reasons(counts: Record<string, number>): string {
  const named = Object.entries(counts).filter(([, n]) => n > 0);
  return named.length === 0 ? '' : `: ${named.map(([why, n]) => `${why} ${n}`).join(', ')}`;
}

function tokenizerTable(rows: TokenizerCost[]): string {
  return markdownTable(
    ['chat', 'prompt tokens', 'cut after (tokens)', 'render + tokenize prompt, CPU µs', 'tokenPlan, CPU µs', 'calls'],
    rows.map((r) => [
      `${fmt(r.chatBytes / 1024, 1)} KB`,
      String(r.promptTokens),
      String(r.generatedTokens),
      fmt(r.renderEncodeUs, 0),
      fmt(r.tokenPlanUs, 0),
      String(r.calls),
    ]),
  );
}

function latencyTable(arms: LatencyArm[]): string {
  return markdownTable(
    ['resume', "median ms, kill to the continuation's first event", 'samples (ok)', 'each ms'],
    arms.map((a) => [
      a.arm,
      fmt(a.medianMs, 1),
      `${a.samples} (${a.ok})`,
      a.samplesMs.map((ms) => fmt(ms, 0)).join(', '),
    ]),
  );
}

function cpuTable(rows: CpuSummary): string {
  return markdownTable(
    ['scenario', 'metric (CPU s)', 'fleetgate', 'fleetgate + model.dir', 'ratio (median of runs)'],
    rows.map((r) => [r.scenario, r.metric, fmt(r.fleetgate, 3), fmt(r.fleetgateModel, 3), times(r.ratio, 3)]),
  );
}

async function main(argv: string[]): Promise<number> {
  const start = startBench('thinking', usage, argv, parse, () => ['fleetgate']);
  if (typeof start === 'number') return start;
  const { opts, machine, work, progress } = start;
  const started = Date.now();
  const modelDir = packagedQwen3Dir();
  const engine = {
    modelDir,
    tokenMs: opts.tokenMs,
    thinkTokens: opts.think,
    maxRunning: opts.maxRunning,
    maxTotalTokens: opts.maxRunning * (opts.job.len[1] + 512),
    cpu: null,
    logDir: work,
  };
  const jobs: JobResult[] = [];
  let tokenizer: TokenizerCost[] = [];
  let latency: LatencyArm[] = [];
  let cpu: Awaited<ReturnType<typeof measureCpu>> | null = null;
  const failures: string[] = [];
  const attempt = async (part: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (error) {
      failures.push(`${part}: ${(error as Error).message}`);
      progress(`${part} FAILED: ${(error as Error).stack ?? error}`);
    }
  };
  try {
    if (opts.parts.includes('tokenizer')) {
      await attempt('tokenizer', async () => {
        tokenizer = measureTokenizerCost({ sizes: [1024, 8192], generated: 500, budgetMs: opts.quick ? 200 : 2000 });
      });
    }
    if (opts.parts.includes('job') || opts.parts.includes('latency')) {
      await attempt('fleet', async () => {
        const fleet = await startFleet(engine, opts.job.engines, opts.proxyCpu);
        try {
          if (opts.parts.includes('job')) {
            const input = join(work, 'input.jsonl');
            writeInput(input, opts.job, 'qwen3');
            for (const stream of opts.streamArms) {
              await attempt(`job ${stream ? 'stream' : 'no-stream'}`, async () => {
                const result = await runJob({ sizes: opts.job, input, dir: work, progress }, fleet, stream);
                jobs.push(result);
                progress(
                  `${result.arm}: ${result.clientErrors} errors, generated/output ${result.generatedOverOutput.toFixed(4)}, ${Math.round(result.wallSec)} s`,
                );
              });
            }
          }
          if (opts.parts.includes('latency')) {
            await attempt('latency', async () => {
              latency = await measureResumeLatency(
                { samples: opts.samples, cutAfter: 30, maxTokens: 120, dir: work, proxyCpu: opts.proxyCpu, progress },
                fleet,
              );
            });
          }
        } finally {
          await fleet.stop();
        }
      });
    }
    if (opts.parts.includes('cpu')) {
      await attempt('cpu', async () => {
        cpu = await measureCpu(opts, work, modelDir, progress);
      });
    }
  } finally {
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
  const cpuSummary = (cpu as Awaited<ReturnType<typeof measureCpu>> | null)?.summary ?? [];
  const streamed = jobs.find((j) => j.arm === 'stream-upstream');
  const checks = [
    streamed ? `client-visible errors: ${streamed.clientErrors} (must be 0)` : null,
    streamed
      ? `output complete, no duplicate: ${streamed.output.missing === 0 && streamed.output.duplicates === 0 ? 'yes' : 'NO'} (${streamed.output.lines} lines, ${streamed.output.duplicates} duplicates, ${streamed.output.missing} missing)`
      : null,
    streamed
      ? `generated / output with stream upstream: ${times(streamed.generatedOverOutput, 3)} (≤ ${times(streamed.generatedOverOutputUpper, 3)} counting the killed engine's unseen tokens; must be ≤ 1.05x)`
      : null,
    ...jobs
      .filter((j) => j.arm === 'no-stream-upstream')
      .map(
        (j) =>
          `generated / output with --no-stream-upstream (each in-flight answer again from its first token): ${times(j.generatedOverOutput, 3)}`,
      ),
    ...cpuSummary.map((r) => `CPU with model.dir / without, ${r.scenario}: ${times(r.ratio, 3)} (must be ≤ 1.1x)`),
  ].filter((line) => line !== null);
  const report = [
    `## bench:thinking (issue #52)`,
    '',
    `Machine: ${machineLine(machine)}. fleetgate pinned to core ${opts.proxyCpu ?? '-'}; the job's engines and batch client unpinned.`,
    '',
    ...(jobs.length > 0
      ? [
          `### Batch job: ${opts.job.requests} chat requests of ${opts.job.len.join('-')} output tokens (reasoning ${opts.think.join('-')}), ${opts.job.engines} engines at ${opts.tokenMs} ms/token, ${opts.maxRunning} slots each; gpu0 killed (SIGKILL) at ${pct(opts.job.killAt)} of the lines`,
          '',
          jobTable(jobs),
          '',
          '"generated" counts the killed engine up to a read of its counter right before the kill; "≤" adds one decode step per request it was running for every token-ms of that gap.',
          '',
        ]
      : []),
    ...(tokenizer.length > 0
      ? [
          '### Tokenizer cost of a token-exact resume (packaged Qwen3 model, this process)',
          '',
          tokenizerTable(tokenizer),
          '',
        ]
      : []),
    ...(latency.length > 0
      ? [
          `### Resume's added latency (the job's engines, ${opts.tokenMs} ms/token; cut after 30 events by SIGKILL of the serving engine)`,
          '',
          latencyTable(latency),
          '',
        ]
      : []),
    ...(cpuSummary.length > 0
      ? [
          `### fleetgate CPU, model configured vs not, nothing cut (bench:overhead's a-cpu / b-cpu, ${opts.runs} run(s))`,
          '',
          cpuTable(cpuSummary),
          '',
        ]
      : []),
    '### issue #52 checks',
    '',
    ...checks.map((line) => `- ${line}`),
    ...failures.map((line) => `- FAILED ${line}`),
    '',
  ].join('\n');
  process.stdout.write(report);
  writeResults(opts.out, 'thinking', started, {
    machine,
    options: { ...opts, out: undefined },
    checks,
    failures,
    jobs,
    tokenizer,
    latency,
    cpu,
  });
  progress(`wrote ${opts.out}`);
  return failures.length === 0 ? 0 : 1;
}

runBench('bench:thinking', main);
