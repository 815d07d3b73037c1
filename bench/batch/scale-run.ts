/**
 * `npm run bench:batch-scale`: `fleetgate batch` at a real job's size (issue #39). Generates an input
 * of N requests with prompts of a given size and, optionally, an output already holding the answers
 * of the first K of them in a given number of bytes (with a torn last line: a kill at a random
 * point), then runs `fleetgate batch --url` (from dist/) against a `fleetgate serve` (dist/) in front
 * of fast simulated servers, each its own process. Reports the batch process's and fleetgate's
 * peak resident set (VmHWM, read every 200 ms), the time from the batch's start to the first request
 * the engines received, requests/s from then to its end, and checks that the engines received
 * exactly the requests the output lacked and that the output ends with N distinct answers.
 *
 *   npm run build && npm run bench:batch-scale -- [--requests 1000000] [--prompt-bytes 1024]
 *       [--output-gb 5] [--done-fraction F (default random in 0.2-0.8, --seed)] [--servers 2]
 *       [--max-seconds S (stop the batch then, as a kill would: figures of the part that ran)] [--out FILE]
 *
 * One JSON in bench/results/raw/ (copy a cited run to bench/results/), a summary on stdout.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { lineBatches } from '../../src/batch/line-reader.js';
import { customIdOf } from '../../src/batch/output-ledger.js';
import { peakRssBytes, promptLineOf, writeAnsweredOutput, writeLines } from '../../test/helpers/batch-files.js';
import { rng } from '../balance/workload.js';
import { numberFlag, RAW_RESULTS_DIR } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';
import { processCpuSeconds } from '../lib/proc-stats.js';
import { freePort, spawnPinned, waitFor } from '../lib/procs.js';
import { REPO_ROOT, SimHost } from '../lib/sim-control.js';
import { FLEETGATE_CLI } from '../lib/targets.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string' },
    'prompt-bytes': { type: 'string' },
    'output-gb': { type: 'string' },
    'done-fraction': { type: 'string' },
    seed: { type: 'string' },
    servers: { type: 'string' },
    'max-seconds': { type: 'string' },
    keep: { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const N = numberFlag(values.requests, 'requests', 1_000_000);
const promptBytes = numberFlag(values['prompt-bytes'], 'prompt-bytes', 1024);
const outputBytes = Math.round(numberFlag(values['output-gb'], 'output-gb', 0, 0, true) * 1e9);
const seed = numberFlag(values.seed, 'seed', 7);
const servers = numberFlag(values.servers, 'servers', 2);
/** The batch is stopped (SIGTERM: resumable) after this long; 0: runs to its end. */
const maxSeconds = numberFlag(values['max-seconds'], 'max-seconds', 0, 0);
/** A seeded point in 0.2-0.8 of the job, unless given. */
const doneFraction =
  outputBytes === 0 ? 0 : numberFlag(values['done-fraction'], 'done-fraction', 0.2 + 0.6 * rng(seed)(), 0, true);
const K = Math.floor(N * doneFraction);
const MB = 1e6;
const log = (line: string) => process.stderr.write(`${line}\n`);

const work = mkdtempSync(join(tmpdir(), 'bench-batch-scale-'));
const input = join(work, 'input.jsonl');
const output = join(work, 'output.jsonl');
let t = performance.now();
const inputBytes = await writeLines(input, N, promptLineOf(promptBytes));
log(`input: ${N} requests, ${(inputBytes / MB).toFixed(0)} MB (${((performance.now() - t) / 1000).toFixed(1)} s)`);
let outputBefore = 0;
if (K > 0) {
  t = performance.now();
  await writeAnsweredOutput(output, K, outputBytes);
  outputBefore = statSync(output).size;
  log(`output: ${K} answers, ${(outputBefore / MB).toFixed(0)} MB (${((performance.now() - t) / 1000).toFixed(1)} s)`);
}

const host = await SimHost.start({
  count: servers,
  engine: () => ({ tokenMs: 0, prefillTokensPerMs: 0, maxRunningRequests: 256, maxTotalNumTokens: 100_000_000 }),
  cpu: null,
  logDir: work,
});
const port = await freePort();
const url = `http://127.0.0.1:${port}/`;
const gateway = spawnPinned(
  'fleetgate',
  process.execPath,
  [
    FLEETGATE_CLI,
    'serve',
    '--listen',
    `127.0.0.1:${port}`,
    '--backend',
    host.urls.join(','),
    '--set',
    'log.access=false',
    '--set',
    'log.level=warn',
    '--set',
    'batch.enabled=false',
    '--set',
    'upstream.warm_up=false',
  ],
  { cpu: null, logFile: join(work, 'fleetgate.log'), cwd: REPO_ROOT },
);

async function sentSoFar(): Promise<number> {
  const stats = await host.stats();
  return stats.reduce((n, s) => n + (s.counters.byPath['/v1/chat/completions'] ?? 0), 0);
}

try {
  await waitFor(
    async () => {
      try {
        const res = await request(`${url}fleet/status`);
        const status = (await res.body.json()) as { ready: number };
        return status.ready === servers;
      } catch {
        return false;
      }
    },
    'fleetgate ready',
    120_000,
    100,
  );
  const before = await sentSoFar();
  const cpuBefore = { fleetgate: processCpuSeconds(gateway.pid), sims: processCpuSeconds(host.proc.pid) };
  const started = performance.now();
  const batch = spawnPinned('batch', process.execPath, [FLEETGATE_CLI, 'batch', input, '-o', output, '--url', url], {
    cpu: null,
    logFile: join(work, 'batch.log'),
    cwd: REPO_ROOT,
  });
  let batchPeak = 0;
  let gatewayPeak = 0;
  let firstSentMs: number | null = null;
  let exited = false;
  let batchCpu = 0;
  void batch.exited.then(() => {
    exited = true;
  });
  const sampler = setInterval(() => {
    batchPeak = Math.max(batchPeak, peakRssBytes(batch.pid));
    batchCpu = Math.max(batchCpu, processCpuSeconds(batch.pid));
    gatewayPeak = Math.max(gatewayPeak, peakRssBytes(gateway.pid));
  }, 200);
  while (!exited && firstSentMs === null) {
    if ((await sentSoFar()) > before) firstSentMs = performance.now() - started;
    else await new Promise((r) => setTimeout(r, 50));
  }
  const limit =
    maxSeconds > 0
      ? setTimeout(() => batch.child.kill('SIGTERM'), Math.max(0, maxSeconds * 1000 - (performance.now() - started)))
      : null;
  const code = await batch.exited;
  if (limit !== null) clearTimeout(limit);
  const stopped = code === 130;
  const endedMs = performance.now() - started;
  clearInterval(sampler);
  gatewayPeak = Math.max(gatewayPeak, peakRssBytes(gateway.pid));
  const cpu = {
    batch: batchCpu,
    fleetgate: processCpuSeconds(gateway.pid) - cpuBefore.fleetgate,
    sims: processCpuSeconds(host.proc.pid) - cpuBefore.sims,
  };
  const sent = (await sentSoFar()) - before;
  log(`batch exited ${code} after ${(endedMs / 1000).toFixed(1)} s; engines received ${sent}`);

  t = performance.now();
  const seen = new Uint8Array(N);
  let lines = 0;
  let repeated = 0;
  for await (const b of lineBatches(output)) {
    for (const line of b.lines) {
      const id = customIdOf(line.bytes) ?? '';
      const i = Number(id.slice('req-'.length));
      if (seen[i] === 1) repeated++;
      seen[i] = 1;
      lines++;
    }
  }
  const distinct = seen.reduce((n, x) => n + x, 0);
  log(`output checked: ${lines} lines, ${distinct} distinct (${((performance.now() - t) / 1000).toFixed(1)} s)`);

  const rps = firstSentMs === null ? 0 : sent / ((endedMs - firstSentMs) / 1000);
  const summary = {
    bench: 'batch-scale',
    date: new Date().toISOString(),
    requests: N,
    prompt_bytes: promptBytes,
    input_bytes: inputBytes,
    output_bytes_before: outputBefore,
    answered_before: K,
    done_fraction: Math.round(doneFraction * 1000) / 1000,
    servers,
    exit_code: code,
    stopped_after_max_seconds: stopped ? maxSeconds : null,
    batch_peak_rss_mb: Math.round(batchPeak / MB),
    fleetgate_peak_rss_mb: Math.round(gatewayPeak / MB),
    first_request_s: firstSentMs === null ? null : Math.round(firstSentMs / 100) / 10,
    run_s: Math.round(endedMs / 100) / 10,
    requests_per_second: Math.round(rps),
    // The machine is shared: what each process spent per request sent, and the rate that CPU allows
    // on 2 cores with nothing else running (batch + fleetgate + simulated engines together).
    cpu_seconds: { batch: round(cpu.batch), fleetgate: round(cpu.fleetgate), sims: round(cpu.sims) },
    cpu_ms_per_request: {
      batch: round((1000 * cpu.batch) / Math.max(1, sent), 3),
      fleetgate: round((1000 * cpu.fleetgate) / Math.max(1, sent), 3),
      sims: round((1000 * cpu.sims) / Math.max(1, sent), 3),
    },
    cpu_bound_requests_per_second_2_cores: Math.round((2 * Math.max(1, sent)) / (cpu.batch + cpu.fleetgate + cpu.sims)),
    load_average: loadavg().map((x) => round(x)),
    engines_received: sent,
    expected_sent: N - K,
    output_lines: lines,
    output_distinct: distinct,
    output_repeated: repeated,
    targets: { batch_rss_mb: 256, fleetgate_rss_mb: 300, first_request_s: 15, requests_per_second: 2000 },
    // A stopped run is judged on what it measured: no complete output expected.
    complete: code === 0 && distinct === N && repeated === 0 && sent === N - K,
    met:
      batchPeak <= 256 * MB &&
      gatewayPeak <= 300 * MB &&
      firstSentMs !== null &&
      firstSentMs <= 15_000 &&
      rps >= 2000 &&
      repeated === 0 &&
      (stopped || (code === 0 && distinct === N && sent === N - K)),
  };
  const outFile = values.out ?? join(RAW_RESULTS_DIR, `batch-scale-${stamp()}.json`);
  mkdirSync(dirname(outFile), { recursive: true });
  writeFileSync(outFile, `${JSON.stringify(summary, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n${outFile}\n`);
} finally {
  await gateway.stop();
  await host.stop();
  if (!values.keep) rmSync(work, { recursive: true, force: true });
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
