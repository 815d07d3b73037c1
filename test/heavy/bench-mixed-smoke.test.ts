/**
 * bench:mixed runs and reports (`--quick`, the idle row and fleetgate with classes): every proxy
 * warmed before the clock, each interactive request, the interactive client's event-loop delay, the
 * targets. Nothing about the figures.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { benchOutDir, runBench, skipUnlessBuilt as skip } from '../helpers/bench-run.js';

const dir = benchOutDir();

test("bench:mixed --quick warms each proxy, then reports each interactive request and the client's event-loop delay", {
  skip,
  timeout: 120_000,
}, async () => {
  const out = join(dir, 'mixed.json');
  const { code, stdout, stderr } = await runBench('bench/mixed/run.ts', [
    '--quick',
    // The quick job can end within 2 s on a fast run: a request every 250 ms leaves some after 1 s.
    '--interval-ms',
    '250',
    '--idle-requests',
    '8',
    '--targets',
    'idle,fleetgate-classes',
    '--out',
    out,
  ]);
  assert.equal(code, 0, stderr);
  assert.match(stdout, /\| fleetgate with classes \| [1-9]/);
  assert.match(
    stdout,
    /\| fleetgate with classes: TTFT p99 after the first second <= 2x idle's \| [0-9.]+x \(runs [0-9.]+;/,
  );
  const json = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(json.runs.length, 2);
  assert.ok(json.options.warmup > 0);
  for (const run of json.runs) {
    assert.equal(run.error, null);
    // The servers completed the warm-up's requests before the clock started, idle row included.
    assert.equal(run.warmedUp, json.options.warmup);
    assert.ok(run.interactive.length > 0 && run.interactive.every((s: { status: number }) => s.status === 200));
    assert.ok(run.loopDelayMaxMs.length > 0);
  }
});
