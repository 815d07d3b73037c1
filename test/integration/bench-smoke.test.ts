/**
 * The benchmarks run and report: each with tiny sizes (`--quick`) against direct, fleetgate and
 * (overhead) the bare fastify + @fastify/http-proxy proxy, so the side-by-side scenarios load two proxies at once. Asserts
 * nothing about the figures (benchmarks are not tests): exit 0, the markdown tables on stdout, the
 * JSON results file written.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const ROOT = new URL('../../', import.meta.url);
const built = existsSync(new URL('dist/cli/index.js', ROOT));
const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function runBench(script: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 110_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const skip = built ? false : 'dist/ is missing: run npm run build';

const BENCHES = [
  {
    bench: 'overhead',
    targets: 'direct,fleetgate,fastify-floor',
    header: /### \(a-cpu\)[^|]+\| target\s+\| req\/s[^\n]+\n[^\n]+\n\| fleetgate [^\n]+\n\| fastify-floor /,
    fleetgateRow: /\| fleetgate /,
  },
  {
    bench: 'balance',
    targets: 'direct,fleetgate',
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

test("bench:mixed --quick warms each proxy, then reports each interactive request and the client's event-loop delay", {
  skip,
  timeout: 120_000,
}, async () => {
  const out = join(dir, 'mixed.json');
  const { code, stdout, stderr } = await runBench('bench/balance/mixed.ts', [
    '--quick',
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
