/**
 * The benchmarks run and report: each with tiny sizes (`--quick`) against direct, fleetgate and
 * (overhead) the bare fastify + @fastify/http-proxy proxy, so the side-by-side scenarios load two proxies at once. Asserts
 * nothing about the figures (benchmarks are not tests): exit 0, the markdown tables on stdout, the
 * JSON results file written. bench:mixed has its own file (bench-mixed-smoke.test.ts): with these
 * two it ran over the per-file time limit (120 s) on a busy machine.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { benchOutDir, runBench, skipUnlessBuilt as skip } from '../helpers/bench-run.js';

const dir = benchOutDir();

const BENCHES = [
  {
    bench: 'overhead',
    targets: 'direct,fleetgate,fastify-floor',
    header: /### \(a-cpu\)[^|]+\| target\s+\| req\/s[^\n]+\n[^\n]+\n\| fleetgate [^\n]+\n\| fastify-floor /,
    fleetgateRow: /\| fleetgate /,
  },
  {
    bench: 'balance',
    // One fleetgate variant: every one of them (the prefix `fleetgate`) took the file past its 120 s.
    targets: 'direct,fleetgate-least-loaded',
    header: /\| target\s+\| makespan s/,
    fleetgateRow: /\| fleetgate least-loaded /,
  },
];

for (const { bench, targets, header, fleetgateRow } of BENCHES) {
  test(`bench:${bench} --quick runs and reports`, { skip, timeout: 120_000 }, async () => {
    const out = join(dir, `${bench}.json`);
    const { code, stdout, stderr } = await runBench(`bench/${bench}/run.ts`, [
      '--quick',
      '--targets',
      targets,
      '--out',
      out,
    ]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, header);
    assert.match(stdout, fleetgateRow);
    const json = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(json.bench, bench);
    assert.ok(json.runs.length > 0);
  });
}

// Issue #52: thinking engines, a batch job with one engine killed, the tokenizer's cost, resume latency (the
// CPU part is bench:overhead's a-cpu / b-cpu, smoke-tested above).
test('bench:thinking --quick runs and reports', { skip, timeout: 120_000 }, async () => {
  const out = join(dir, 'thinking.json');
  const { code, stdout, stderr } = await runBench('bench/thinking/run.ts', [
    '--quick',
    '--parts',
    'job,tokenizer,latency',
    '--out',
    out,
  ]);
  assert.equal(code, 0, stderr);
  assert.match(stdout, /\| stream-upstream +\| \d+ +\| 0 +\|/);
  assert.match(stdout, /\| no-stream-upstream /);
  assert.match(stdout, /\| token-exact, mid-reasoning /);
  const json = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(json.bench, 'thinking');
  assert.equal(json.jobs.length, 2);
  assert.equal(json.tokenizer.length, 2);
});
