/**
 * bench:batch over real sockets (a smoke check: on a shared 2-core machine one setting's makespan
 * moves 2x between runs; the cited figure is run.ts's virtual-time model). `fleetgate batch`'s
 * engine with `--concurrency auto` against a sweep of
 * hand-tuned `--concurrency N`, on bench:balance's KV-limited simulated fleet (7 servers, one 1.3x
 * slower, answers of unknown length; bench/balance/fleet-spec.ts). Each setting runs the same job
 * through a fresh fleetgate (adaptive caps start anew) and the makespan is compared: the target is
 * auto >= 0.97x the best N's throughput (auto makespan <= best / 0.97).
 *
 *   node --import tsx bench/batch/sockets-run.ts [--requests 2000] [--sweep 14,28,56,112,224] [--out FILE]
 *
 * One summary JSON in bench/results/raw/, a table on stdout, progress on stderr.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { createGateway } from '../../src/app.js';
import { batchClassOf, ConcurrencyControl, type FleetView } from '../../src/batch/auto-concurrency.js';
import { BatchSender } from '../../src/batch/batch-sender.js';
import { checkInputFile } from '../../src/batch/input-file.js';
import { runLedgered } from '../../src/batch/ledgered-run.js';
import { validateConfig } from '../../src/config/validate.js';
import { fetchFleetStatus } from '../../src/http/fleet-status-client.js';
import { engineFor, engineOptions, SERVERS, workloadSpec } from '../balance/fleet-spec.js';
import { makeWorkload } from '../balance/workload.js';
import { numberFlag, RAW_RESULTS_DIR } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';
import { SimHost } from '../lib/sim-control.js';

const TARGET = 0.97;

const { values } = parseArgs({
  options: { requests: { type: 'string' }, sweep: { type: 'string' }, out: { type: 'string' } },
});
const requestsCount = numberFlag(values.requests, 'requests', 2000);
const sizes = { quick: true, requests: requestsCount };
const engine = engineOptions(sizes);
const slots = engine.maxRunningRequests * SERVERS;
const sweep = (values.sweep ?? [0.25, 0.5, 1, 2, 4].map((f) => Math.round(f * slots)).join(','))
  .split(',')
  .map((n) => numberFlag(n, 'sweep', 1));

const work = mkdtempSync(join(tmpdir(), 'bench-batch-'));
const inputPath = join(work, 'input.jsonl');
writeFileSync(
  inputPath,
  makeWorkload(workloadSpec(sizes))
    .map((job) =>
      JSON.stringify({
        custom_id: `req-${job.index}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: JSON.parse(job.body.toString()),
      }),
    )
    .join('\n'),
);
const host = await SimHost.start({ count: SERVERS, engine: (i) => engineFor(engine, i), cpu: null, logDir: work });

/** One job through a fresh fleetgate; its makespan in seconds. */
async function runOnce(concurrency: number | null, label: string): Promise<{ seconds: number; failed: number }> {
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      backends: host.urls.map((url, i) => ({ url, name: `gpu${i}` })),
      log: { level: 'silent', access: false },
      batch: { enabled: false },
    },
    'bench',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }) });
  const url = new URL(`${await gateway.listen()}/`);
  const fetchStatus = () => fetchFleetStatus<FleetView>(url);
  while ((await fetchStatus()).ready < SERVERS) await new Promise((r) => setTimeout(r, 50));
  const control = new ConcurrencyControl({ fixed: concurrency, fetchStatus, intervalMs: 500 });
  await control.start();
  const sender = new BatchSender({
    base: url,
    priorityClass: batchClassOf(control.view),
    apiKey: null,
    timeoutMs: 600_000,
    connections: 4096,
  });
  const started = performance.now();
  const result = await runLedgered({
    input: await checkInputFile(inputPath),
    outputPath: join(work, `${label}.jsonl`),
    errorsPath: join(work, `${label}.errors.jsonl`),
    send: sender.send,
    limit: control.limit,
    maxAttempts: 3,
  });
  const seconds = (performance.now() - started) / 1000;
  control.stop();
  await sender.close();
  await gateway.close();
  process.stderr.write(`${label}: ${seconds.toFixed(2)} s, ${result.completed} done, ${result.failed} failed\n`);
  return { seconds, failed: result.failed };
}

try {
  const auto = await runOnce(null, 'auto');
  const manual: Array<{ concurrency: number; seconds: number; failed: number }> = [];
  for (const n of sweep) manual.push({ concurrency: n, ...(await runOnce(n, `n${n}`)) });
  const best = manual.reduce((a, b) => (b.seconds < a.seconds ? b : a));
  const ratio = best.seconds / auto.seconds;
  const summary = {
    bench: 'batch',
    date: new Date().toISOString(),
    reduced: `quick sizes on a shared 2-core machine: ${requestsCount} requests, ${SERVERS} servers x ${engine.maxRunningRequests} slots, KV ${engine.maxTotalNumTokens} tokens, ${engine.tokenMs} ms/token`,
    requests: requestsCount,
    fleet_slots: slots,
    auto_makespan_s: round(auto.seconds),
    auto_failed: auto.failed,
    sweep: manual.map((m) => ({ concurrency: m.concurrency, makespan_s: round(m.seconds), failed: m.failed })),
    best_concurrency: best.concurrency,
    best_makespan_s: round(best.seconds),
    auto_throughput_vs_best: round(ratio, 3),
    target: TARGET,
    met: ratio >= TARGET,
  };
  const out = values.out ?? join(RAW_RESULTS_DIR, `batch-${stamp()}.json`);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  process.stdout.write(
    `| concurrency | makespan (s) |\n| --- | --- |\n| auto | ${summary.auto_makespan_s} |\n${summary.sweep
      .map((m) => `| ${m.concurrency} | ${m.makespan_s} |`)
      .join(
        '\n',
      )}\n\nauto throughput / best hand-tuned (N=${best.concurrency}): ${summary.auto_throughput_vs_best} (target >= ${TARGET}: ${summary.met ? 'met' : 'missed'})\n${out}\n`,
  );
} finally {
  await host.stop();
  rmSync(work, { recursive: true, force: true });
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
