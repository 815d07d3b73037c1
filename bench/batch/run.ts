/**
 * `npm run bench:batch`: `fleetgate batch --concurrency auto` against a sweep of hand-tuned
 * `--concurrency N`, on bench:balance's KV-limited fleet (7 servers x 32 slots, one 1.3x slower,
 * KV 10,000 tokens, answers of unknown length) in its virtual-time model (batch-model.ts): the
 * real auto logic, queue, policy and adaptive caps, no sockets and no real clock, so several
 * workload seeds give a figure a shared machine cannot blur (the real-socket run, sockets-run.ts,
 * swung 2x between runs). Target: auto's throughput >= 0.97x the best N's of each seed, i.e.
 * best makespan / auto makespan >= 0.97.
 *
 *   node --import tsx bench/batch/run.ts [--seeds 8] [--sweep 56,112,...] [--kv-tokens 10000] [--out FILE]
 *
 * A table on stdout, progress on stderr, one summary JSON (bench/results/raw/batch-model-<stamp>.json).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { engineOptions, SERVERS, workloadSpec } from '../balance/fleet-spec.js';
import { makeWorkload } from '../balance/workload.js';
import { numberFlag, RAW_RESULTS_DIR } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';
import { modelBatchJob } from './batch-model.js';

const TARGET = 0.97;
/** The sweep, in multiples of the fleet's batch slots: from a quarter (starved) to the 4x a script pushes. */
const SWEEP_SLOTS = [0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4];

const { values } = parseArgs({
  options: {
    seeds: { type: 'string' },
    sweep: { type: 'string' },
    'kv-tokens': { type: 'string' },
    out: { type: 'string' },
  },
});
const seeds = numberFlag(values.seeds, 'seeds', 8);
const kvTokens = numberFlag(values['kv-tokens'], 'kv-tokens', 10_000, 2);
const engine = engineOptions({ quick: false, kvTokens });
const slots = engine.maxRunningRequests * SERVERS;
const sweep = (values.sweep ?? SWEEP_SLOTS.map((f) => Math.round(f * slots)).join(','))
  .split(',')
  .map((n) => numberFlag(n, 'sweep', 1));

const round = (n: number, digits = 3) => Math.round(n * 10 ** digits) / 10 ** digits;
const perSeed = [];
for (let seed = 1; seed <= seeds; seed++) {
  const jobs = makeWorkload(workloadSpec({ quick: false, seed }));
  const auto = await modelBatchJob({ jobs, concurrency: null, kvTokens });
  const fixed = [];
  for (const n of sweep)
    fixed.push({
      concurrency: n,
      makespan_s: round((await modelBatchJob({ jobs, concurrency: n, kvTokens })).makespanSec),
    });
  const best = fixed.reduce((a, b) => (b.makespan_s < a.makespan_s ? b : a));
  const row = {
    seed,
    auto_makespan_s: round(auto.makespanSec),
    auto_limit_mean: round(auto.meanLimit, 1),
    auto_limit_max: auto.maxLimit,
    best_concurrency: best.concurrency,
    best_makespan_s: best.makespan_s,
    auto_over_best_makespan: round(auto.makespanSec / best.makespan_s),
    throughput_vs_best: round(best.makespan_s / auto.makespanSec),
    sweep: fixed,
  };
  perSeed.push(row);
  process.stderr.write(
    `seed ${seed}: auto ${row.auto_makespan_s} s (limit ~${row.auto_limit_mean}), best N=${best.concurrency} ${best.makespan_s} s: ${row.throughput_vs_best}x\n`,
  );
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const throughput = perSeed.map((r) => r.throughput_vs_best);
const summary = {
  bench: 'batch',
  method:
    'virtual-time model (bench/batch/batch-model.ts over bench/balance/model.ts): the batch runner loop with the real ConcurrencyControl, fleetgate queue, least-loaded policy, adaptive caps and 250 ms load reports, the simulator Engine; no sockets, no real clock',
  date: new Date().toISOString(),
  fleet: `${SERVERS} servers x ${engine.maxRunningRequests} slots, KV ${engine.maxTotalNumTokens} tokens, ${engine.tokenMs} ms/token, gpu6 1.3x slower`,
  requests_per_job: workloadSpec({ quick: false }).count,
  seeds,
  sweep,
  target: TARGET,
  mean_auto_over_best_makespan: round(mean(perSeed.map((r) => r.auto_over_best_makespan))),
  mean_throughput_vs_best: round(mean(throughput)),
  min_throughput_vs_best: Math.min(...throughput),
  met: mean(throughput) >= TARGET,
  seeds_met: throughput.filter((x) => x >= TARGET).length,
  per_seed: perSeed,
};
const out = values.out ?? join(RAW_RESULTS_DIR, `batch-model-${stamp()}.json`);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
process.stdout.write(
  `| seed | auto makespan s | best N | best makespan s | auto / best makespan | throughput vs best |\n|---|---|---|---|---|---|\n${perSeed
    .map(
      (r) =>
        `| ${r.seed} | ${r.auto_makespan_s} | ${r.best_concurrency} | ${r.best_makespan_s} | ${r.auto_over_best_makespan} | ${r.throughput_vs_best}x |`,
    )
    .join(
      '\n',
    )}\n\nmean auto / best makespan ${summary.mean_auto_over_best_makespan}; throughput vs best: mean ${summary.mean_throughput_vs_best}x, min ${summary.min_throughput_vs_best}x (target >= ${TARGET}: ${summary.met ? 'met' : 'missed'}, ${summary.seeds_met}/${seeds} seeds)\n${out}\n`,
);
