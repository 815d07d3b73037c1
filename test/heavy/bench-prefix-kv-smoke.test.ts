/**
 * bench:prefix's kv-aware arm (issue #55) runs and reports with tiny sizes (`--quick`): fleetgate
 * kv-aware over simulated engines that tokenize with the packaged Qwen3 model and publish KV events,
 * on the shared-prefix multi-turn load. Asserts nothing about the figures (benchmarks are not tests):
 * exit 0, the table and issue #55's check table on stdout, the JSON written with kv-aware's decisions.
 * A file of its own: bench-smoke.test.ts is near its per-file time limit on a busy machine.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { benchOutDir, runBench, skipUnlessBuilt as skip } from '../helpers/bench-run.js';

const dir = benchOutDir();

test('bench:prefix --quick --targets kv runs and reports', { skip, timeout: 120_000 }, async () => {
  const out = join(dir, 'prefix-kv.json');
  const { code, stdout, stderr } = await runBench('bench/prefix/run.ts', [
    '--quick',
    '--targets',
    'kv',
    '--workloads',
    'kv-multi-turn',
    '--out',
    out,
  ]);
  assert.equal(code, 0, stderr);
  assert.match(stdout, /\| balancer \| makespan s \| output tokens\/s \|[^\n]+\n[^\n]+\n\| fleetgate kv-aware \|/);
  assert.match(stdout, /### issue #55 targets: kv-aware/);
  const json = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(json.bench, 'prefix');
  const run = json.runs[0];
  assert.equal(run.error, null);
  assert.ok(run.metrics.ok > 0);
  assert.ok(Object.values(run.metrics.kvDecisions as Record<string, number>).some((n) => n > 0));
});
