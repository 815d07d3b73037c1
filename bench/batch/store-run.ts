/**
 * The Batch API's throughput with its two stores, in one run: the same job (uploaded over HTTP,
 * created, polled until completed) through a fleetgate with `batch.dir` and through one with
 * `batch.database_url` (a PostgreSQL this bench starts, as the tests do: test/helpers/postgres.ts),
 * alternating, `--rounds` times each after one discarded warm-up round. The target: the database store's makespan within 1.1x the
 * directory store's (median of the rounds; the mean is in the JSON too).
 *
 *   node --import tsx bench/batch/store-run.ts [--requests 3000] [--rounds 3] [--out FILE]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { createGateway } from '../../src/app.js';
import { validateConfig } from '../../src/config/validate.js';
import { SimServer } from '../../src/sim/index.js';
import { chatLine } from '../../test/helpers/batch.js';
import { freePorts } from '../../test/helpers/net.js';
import { startPostgres } from '../../test/helpers/postgres.js';
import { numberFlag, RAW_RESULTS_DIR, writeResults } from '../lib/cli.js';
import { stamp } from '../lib/machine.js';

const TARGET = 1.1;
const { values } = parseArgs({
  options: { requests: { type: 'string' }, rounds: { type: 'string' }, out: { type: 'string' } },
});
const requests = numberFlag(values.requests, 'requests', 3000);
const rounds = numberFlag(values.rounds, 'rounds', 3);
const out = values.out ?? join(RAW_RESULTS_DIR, `batch-store-${stamp()}.json`);
const started = Date.now();
const cleanups: Array<() => unknown> = [];
const work = mkdtempSync(join(tmpdir(), 'bench-batch-store-'));
cleanups.push(() => rmSync(work, { recursive: true, force: true }));

const ports = await freePorts(4);
const sims = ports.map(
  (port, i) => new SimServer({ port, name: `gpu${i}`, engine: { tokenMs: 2, maxRunningRequests: 32 } }),
);
for (const sim of sims) sim.start();
await Promise.all(sims.map((sim) => sim.whenReady()));
const cluster = await startPostgres({ after: (fn) => cleanups.unshift(fn) });
const input = new Blob([`${Array.from({ length: requests }, (_, i) => chatLine(`req-${i}`, 8)).join('\n')}\n`]);

/** One job through a fresh fleetgate with `batch`; seconds from create to completed. */
async function runOnce(batch: Record<string, unknown>): Promise<number> {
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      backends: sims.map((sim) => ({ url: sim.url, name: sim.name })),
      log: { level: 'silent', access: false },
      batch,
    },
    'bench',
  );
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }) });
  const base = await gateway.listen();
  try {
    while (gateway.fleet.registry.ready.length < sims.length) await new Promise((r) => setTimeout(r, 50));
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', input, 'input.jsonl');
    const file = (await (await fetch(`${base}/v1/files`, { method: 'POST', body: form })).json()) as { id: string };
    const t0 = performance.now();
    const created = (await (
      await fetch(`${base}/v1/batches`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      })
    ).json()) as { id: string };
    const deadline = Date.now() + 300_000;
    for (;;) {
      const batch = (await (await fetch(`${base}/v1/batches/${created.id}`)).json()) as {
        status: string;
        request_counts: { completed: number };
      };
      if (batch.status === 'completed') {
        if (batch.request_counts.completed !== requests) throw new Error(`${batch.request_counts.completed} completed`);
        return (performance.now() - t0) / 1000;
      }
      if (batch.status === 'failed' || Date.now() > deadline) throw new Error(`batch ${batch.status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await gateway.close();
  }
}

const seconds: { directory: number[]; postgres: number[] } = { directory: [], postgres: [] };
try {
  for (let round = -1; round < rounds; round++) {
    const directory = await runOnce({ dir: join(work, `dir-${round}`) });
    const postgres = await runOnce({ dir: join(work, `pg-${round}`), database_url: await cluster.createDatabase() });
    if (round < 0) continue;
    seconds.directory.push(directory);
    seconds.postgres.push(postgres);
    process.stderr.write(
      `round ${round + 1}: directory ${seconds.directory.at(-1)?.toFixed(2)} s, postgres ${seconds.postgres.at(-1)?.toFixed(2)} s\n`,
    );
  }
} finally {
  await Promise.all(sims.map((sim) => sim.stop()));
  for (const fn of cleanups) await fn();
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};
// The median: on a shared machine one round in a few runs 1.5-2x long, for either store.
const ratio = median(seconds.postgres) / median(seconds.directory);
const summary = {
  requests,
  rounds,
  seconds,
  meanSeconds: { directory: mean(seconds.directory), postgres: mean(seconds.postgres) },
  medianSeconds: { directory: median(seconds.directory), postgres: median(seconds.postgres) },
  meanRatio: mean(seconds.postgres) / mean(seconds.directory),
  requestsPerSecond: { directory: requests / median(seconds.directory), postgres: requests / median(seconds.postgres) },
  postgresMakespanRatio: ratio,
  target: TARGET,
  met: ratio <= TARGET,
};
writeResults(out, 'batch-store', started, summary);
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n${out}\n`);
process.exit(0);
