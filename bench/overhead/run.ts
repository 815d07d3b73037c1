/**
 * `npm run bench:overhead`: what a proxy costs in front of a fleet. Simulated backends and this
 * client on one core, the proxy under test (fleetgate, NGINX, HAProxy; or none: direct) alone on
 * the other, or, for the side-by-side scenarios, every proxy at once; each scenario repeated
 * `--runs` times (targets interleaved within a run), medians reported as a markdown table on
 * stdout and JSON in bench/results/raw/. Progress goes to stderr.
 */
import { existsSync, rmSync } from 'node:fs';
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
import { OtlpSink } from '../lib/otlp-sink.js';
import { SimHost } from '../lib/sim-control.js';
import { type RunningTarget, startTarget, type TargetKind, type TargetSpec } from '../lib/targets.js';
import { checkTargets, mediansOf, type RunRecord, renderChecks, renderTables } from './report.js';
import { FULL, QUICK, SCENARIO_IDS, SCENARIOS, type ScenarioId, type Sizes } from './scenarios.js';

/** `--issue54`: fleetgate with every shipped default, its histograms off, the bare stack and the two peers. */
const ISSUE54_TARGETS = 'fleetgate,fleetgate-no-token-latency,fastify-floor,nginx,haproxy';

const usage = `usage: npm run bench:overhead -- [options]

  --runs N              repetitions of each scenario (default 3; --quick: 1)
  --quick               tiny sizes, for a smoke run
  --targets LIST        direct,fleetgate,fastify-floor,nginx,haproxy (default); fastify-floor is bare
                        fastify + @fastify/http-proxy with a least-connections picker
                        (bench/lib/fastify-floor-proxy.ts), the floor of fleetgate's own stack; also
                        node-floor: a bare node:http + undici.dispatch proxy (bench/lib/node-floor-proxy.ts),
                        what any Node proxy costs at least; fleetgate-models: fleetgate routing by
                        model (each body parsed for its model); fleetgate-no-resume: fleetgate with
                        retry.resume_limit 0 (no stream resume: no body parse, no event journal);
                        fleetgate-before: the build that
                        FLEETGATE_BEFORE_CLI names (another commit's dist/cli/index.js);
                        fleetgate-no-token-latency: metrics.token_latency false; fleetgate-tracing:
                        every request traced (sample_ratio 1) to an OTLP sink in this process;
                        fleetgate-tracing-sampled: the same at sample_ratio 0.1
  --scenarios LIST      a,a-cpu,b,b-cpu,c,d (default all); a-cpu and b-cpu run (a)'s and (b)'s load
                        on every proxy target at once (same core, requests in turn), for CPU ratios
                        that a machine drifting in speed moves alike
  --issue54             issue #54's shape: --scenarios a-cpu,b-cpu --targets
                        ${ISSUE54_TARGETS} (64 concurrent small
                        chats, 256 streams x 200 chunks of a few characters; the proxies on their
                        own core); --scenarios / --targets still override
  --backends K          simulated backends (default ${FULL.backends})
  --requests N          (a) requests per run (default ${FULL.requests})
  --concurrency N       (a) concurrency (default ${FULL.concurrency})
  --streams N           (b) concurrent streams (default ${FULL.streams})
  --rounds N            (b) streams per slot per run (default ${FULL.rounds})
  --chunks N            (b) tokens per stream (default ${FULL.chunks})
  --paced-streams N     (c) concurrent streams (default ${FULL.pacedStreams})
  --paced-chunks N      (c) tokens per stream (default ${FULL.pacedChunks})
  --pace-ms MS          (c) decode step (default ${FULL.paceMs})
  --sequential N        (d) sequential streams (default ${FULL.sequential})
  --proxy-cpu N         core for the proxy (default 0); --client-cpu N for sims + client (default 1)
  --no-pin              do not pin with taskset
  --cpu-prof DIR        run fleetgate under node --cpu-prof, writing .cpuprofile files to DIR
                        (summarise with: node --import tsx bench/profile-summary.ts DIR)
  --out FILE            JSON results (default bench/results/raw/overhead-<date>.json)
  --quiet-wait SEC      before each measurement, wait up to SEC for other load to settle (default 20; --quick: 0)
  --keep                keep the work directory (configs, proxy logs)
`;

/**
 * `fleetgate-models`: fleetgate routing by model (a `models` alias declared, so each request's body
 * is parsed for its `model`); against `fleetgate` it prices that parse. A single-model fleet
 * without aliases does not parse at all.
 */
type TargetId =
  | TargetKind
  | 'fleetgate-models'
  | 'fleetgate-no-resume'
  | 'fleetgate-before'
  | 'fleetgate-no-token-latency'
  | 'fleetgate-tracing'
  | 'fleetgate-tracing-sampled';

/** Where the tracing targets export their spans: an OTLP/HTTP sink in this process (bench/lib/otlp-sink.ts). */
let tracingSink = '';

/** fleetgate tracing to the sink, keeping `sampleRatio` of the traces. */
function tracingTarget(name: TargetId, sampleRatio: number): TargetSpec {
  return {
    name,
    kind: 'fleetgate',
    get extraYaml() {
      return `tracing:\n  otlp_endpoint: ${tracingSink}\n  sample_ratio: ${sampleRatio}\n`;
    },
  };
}

const TARGETS: Record<TargetId, TargetSpec> = {
  direct: { name: 'direct', kind: 'direct' },
  fleetgate: { name: 'fleetgate', kind: 'fleetgate' },
  'fleetgate-models': {
    name: 'fleetgate-models',
    kind: 'fleetgate',
    modelAliases: { bench: 'meta-llama/Llama-3.1-8B-Instruct' },
  },
  'fleetgate-no-resume': { name: 'fleetgate-no-resume', kind: 'fleetgate', resumeLimit: 0 },
  // Issue #41: the build before token latency and traces (FLEETGATE_BEFORE_CLI: that commit's dist/cli/index.js),
  // this one with its histograms off, and this one tracing every request (sample_ratio 1), or one in ten, to a local sink.
  'fleetgate-before': { name: 'fleetgate-before', kind: 'fleetgate', cli: process.env.FLEETGATE_BEFORE_CLI ?? '' },
  'fleetgate-no-token-latency': {
    name: 'fleetgate-no-token-latency',
    kind: 'fleetgate',
    extraYaml: 'metrics:\n  token_latency: false\n',
  },
  'fleetgate-tracing': tracingTarget('fleetgate-tracing', 1),
  'fleetgate-tracing-sampled': tracingTarget('fleetgate-tracing-sampled', 0.1),
  nginx: { name: 'nginx', kind: 'nginx', balance: 'least_conn' },
  haproxy: { name: 'haproxy', kind: 'haproxy', balance: 'leastconn' },
  'node-floor': { name: 'node-floor', kind: 'node-floor' },
  'fastify-floor': { name: 'fastify-floor', kind: 'fastify-floor' },
};

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...COMMON_OPTIONS,
      scenarios: { type: 'string' },
      backends: { type: 'string' },
      requests: { type: 'string' },
      concurrency: { type: 'string' },
      streams: { type: 'string' },
      rounds: { type: 'string' },
      chunks: { type: 'string' },
      'paced-streams': { type: 'string' },
      'paced-chunks': { type: 'string' },
      'pace-ms': { type: 'string' },
      sequential: { type: 'string' },
      'cpu-prof': { type: 'string' },
      issue54: { type: 'boolean' },
    },
  });
  if (values.help) return null;
  const int = numberFlag;
  const base = values.quick ? QUICK : FULL;
  const sizes: Sizes = {
    backends: int(values.backends, 'backends', base.backends),
    requests: int(values.requests, 'requests', base.requests),
    concurrency: int(values.concurrency, 'concurrency', base.concurrency),
    streams: int(values.streams, 'streams', base.streams),
    rounds: int(values.rounds, 'rounds', base.rounds),
    chunks: int(values.chunks, 'chunks', base.chunks),
    pacedStreams: int(values['paced-streams'], 'paced-streams', base.pacedStreams),
    pacedChunks: int(values['paced-chunks'], 'paced-chunks', base.pacedChunks),
    paceMs: int(values['pace-ms'], 'pace-ms', base.paceMs),
    sequential: int(values.sequential, 'sequential', base.sequential),
  };
  const preset = values.issue54 ? { targets: ISSUE54_TARGETS, scenarios: 'a-cpu,b-cpu' } : null;
  const targets = (values.targets ?? preset?.targets ?? 'direct,fleetgate,fastify-floor,nginx,haproxy')
    .split(',')
    .map((t) => t.trim());
  for (const t of targets) {
    if (!(t in TARGETS)) throw new Error(`--targets: unknown target '${t}' (${Object.keys(TARGETS).join(', ')})`);
    const cli = TARGETS[t as TargetId].cli;
    if (cli !== undefined && !existsSync(cli)) {
      throw new Error(`--targets ${t}: set FLEETGATE_BEFORE_CLI to a built dist/cli/index.js (got '${cli}')`);
    }
  }
  const scenarios = (values.scenarios ?? preset?.scenarios ?? SCENARIO_IDS.join(','))
    .split(',')
    .map((s) => s.trim()) as ScenarioId[];
  for (const s of scenarios) {
    if (!SCENARIO_IDS.includes(s)) throw new Error(`--scenarios: unknown scenario '${s}' (${SCENARIO_IDS.join(', ')})`);
  }
  return {
    ...commonSettings(values, 'overhead'),
    sizes,
    targets: targets as TargetId[],
    scenarios,
    nodeArgs: values['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof']}`] : [],
  };
}

async function main(argv: string[]): Promise<number> {
  const start = startBench('overhead', usage, argv, parse, (o) => o.targets.map((t) => TARGETS[t].kind));
  if (typeof start === 'number') return start;
  const { opts, machine, work, progress } = start;
  const records: RunRecord[] = [];
  const started = Date.now();
  const sink = opts.targets.some((t) => t.startsWith('fleetgate-tracing')) ? await OtlpSink.start() : null;
  tracingSink = sink?.url ?? '';
  try {
    for (const id of opts.scenarios) {
      const scenario = SCENARIOS[id];
      const sims = await SimHost.start({
        count: opts.sizes.backends,
        engine: () => scenario.engine(opts.sizes),
        cpu: opts.clientCpu,
        logDir: work,
      });
      try {
        for (let run = 1; run <= opts.runs; run++) {
          const order = inRunOrder(opts.targets, run);
          const groups = scenario.together ? [order.filter((kind) => kind !== 'direct')] : order.map((kind) => [kind]);
          for (const kinds of groups) {
            if (kinds.length === 0) continue;
            const specs = kinds.map((kind) => TARGETS[kind]);
            const label = `${scenario.title} run ${run}/${opts.runs}`;
            const targets: RunningTarget[] = [];
            try {
              await settle(opts.quietWaitMs, progress);
              for (const spec of specs) {
                targets.push(
                  await startTarget(spec, {
                    backends: sims.urls,
                    cpu: opts.proxyCpu,
                    dir: join(work, `${id}-${run}-${spec.name}`),
                    nodeArgs: opts.nodeArgs,
                  }),
                );
              }
              const metrics = scenario.together
                ? await scenario.run(targets, sims, opts.sizes)
                : [await scenario.run(targets[0], sims, opts.sizes)];
              specs.forEach((spec, i) => {
                records.push({ scenario: id, run, target: spec.name, metrics: metrics[i], error: null });
                const figures = JSON.stringify(metrics[i], (_k, v) => (typeof v === 'number' ? +v.toPrecision(4) : v));
                progress(`${label} ${spec.name}: ${figures}`);
              });
            } catch (error) {
              const message = (error as Error).message;
              for (const spec of specs)
                records.push({ scenario: id, run, target: spec.name, metrics: null, error: message });
              progress(`${label} ${kinds.join(', ')}: FAILED: ${message}`);
            } finally {
              await Promise.all(targets.map((target) => target.stop()));
            }
          }
        }
      } finally {
        await sims.stop();
      }
    }
  } finally {
    await sink?.close();
    if (sink !== null) progress(`OTLP sink received ${sink.exports} exports, ${sink.bytes} bytes`);
    if (!opts.keep) rmSync(work, { recursive: true, force: true });
  }
  const medians = mediansOf(records);
  const checks = checkTargets(medians);
  const targetNames = opts.targets.map((t) => TARGETS[t].name);
  const report = [
    `## fleetgate overhead bench (medians of ${opts.runs} run${opts.runs === 1 ? '' : 's'})`,
    '',
    `Machine: ${machineLine(machine)}. Proxy pinned to core ${opts.proxyCpu ?? '-'}, ${opts.sizes.backends} simulated backends and the load generator to core ${opts.clientCpu ?? '-'}. ` +
      `"core 1 busy" is the CPU of backends + client over the wall time: near 100% means the test rig, not the proxy, set the pace. ` +
      `"other load" is CPU used by anything else on the machine meanwhile (other processes, kernel softirq), in cores: high means a noisy run.`,
    '',
    renderTables(medians, targetNames, records, opts.sizes),
    '',
    '### issue targets (#7; TTFC: #37; #41; #54)',
    '',
    renderChecks(checks),
    '',
  ].join('\n');
  process.stdout.write(report);
  writeResults(opts.out, 'overhead', started, {
    machine,
    options: { ...opts, out: undefined },
    medians,
    targets: checks,
    runs: records,
  });
  progress(`wrote ${opts.out}`);
  return records.some((r) => r.metrics !== null) ? 0 : 1;
}

runBench('bench:overhead', main);
