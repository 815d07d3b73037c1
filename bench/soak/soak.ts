/**
 * One soak run: a fleet of simulated engines under `fleetgate launch`, a steady mixed client load
 * (plain HTTP and the openai SDK; chat and completions; streamed or not), a seeded fault schedule,
 * fleetgate's resources scraped every 5 s, and at the end the ledger's table and verdict. Used by
 * `npm run bench:soak` (run.ts) and the CI-sized soak test.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fleetgateEntry } from '../../test/helpers/cli-entry.js';
import { spawnLaunch, stopLaunched } from '../../test/helpers/launch.js';
import { freePorts } from '../../test/helpers/net.js';
import { waitFor } from '../../test/helpers/wait.js';
import { type SendContext, sendHttp, sendSdk } from './clients.js';
import { type DoneFault, FaultRunner, faultFileOf } from './fault-runner.js';
import { countByKind, type FaultKind, planFaults, seededRandom } from './faults.js';
import {
  type ClientMode,
  type ClientName,
  Ledger,
  type LedgerRow,
  type LedgerTable,
  ledgerFailures,
  type RequestKind,
  summarize,
} from './ledger.js';
import {
  compareWindows,
  parseSample,
  type ResourceReport,
  type ResourceSample,
  resourceFailures,
} from './resources.js';

export interface SoakOptions {
  durationMs: number;
  seed: number;
  engines: number;
  faults: number;
  kinds?: readonly FaultKind[];
  /** Requests started per second. */
  rate: number;
  /** A request with neither answer nor error by then is lost. */
  deadlineMs: number;
  /** Test hook: this many responses are swallowed by a fake client (never settled): the ledger must fail. */
  swallow?: number;
  /** Resource windows compared (first vs last); 60 s for a 10-minute run. */
  windowMs: number;
  progress?: (line: string) => void;
}

export interface SoakResult {
  options: Omit<SoakOptions, 'progress'>;
  table: LedgerTable;
  faults: DoneFault[];
  faultKinds: Partial<Record<FaultKind, number>>;
  resources: ResourceReport;
  samples: ResourceSample[];
  failures: string[];
  rows: LedgerRow[];
  errorTimesMs: number[];
}

function simCommand(faultDir: string): string {
  return [
    process.execPath,
    ...fleetgateEntry(),
    'sim --port {port} --name {name} --log-stdout --exit-on-failure --speed fast --token-ms 15',
    `--fault-file ${faultFileOf(faultDir, '{name}')}`,
  ].join(' ');
}

interface Launched {
  child: ChildProcess;
  url: string;
  exit: Promise<number | null>;
  stop(): Promise<void>;
}

async function startFleet(dir: string, engines: number): Promise<Launched> {
  const ports = await freePorts(engines);
  const config = {
    listen: '127.0.0.1:0',
    health: {
      starting_interval: '200ms',
      interval: '1s',
      timeout: '1s',
      progress_timeout: '5s',
      ejection_time: '3s',
      max_ejection_time: '10s',
    },
    queue: { timeout: '30s' },
    log: { level: 'info', access: false },
    launch: {
      command: simCommand(dir),
      ports,
      log: join(dir, 'logs/sglang_{name}.log'),
      restart_backoff: '1s',
      stop_grace: '2s',
      max_restarts: 10_000,
    },
  };
  const file = join(dir, 'fleetgate.yaml');
  writeFileSync(file, JSON.stringify(config));
  const { child, exit, listening } = spawnLaunch(file, 20_000);
  const url = await listening(60_000);
  const stop = async () => {
    await stopLaunched(child, exit, await enginePids(url).catch(() => []), 20_000);
  };
  return { child, url, exit, stop };
}

async function enginePids(url: string): Promise<number[]> {
  const res = await fetch(`${url}/fleet/status`);
  const body = (await res.json()) as { backends: Array<{ supervision?: { pid?: number | null } | null }> };
  return body.backends.map((b) => b.supervision?.pid).filter((pid): pid is number => typeof pid === 'number');
}

const KINDS: RequestKind[] = ['chat', 'chat-stream', 'completion', 'completion-stream'];

export async function runSoak(opts: SoakOptions): Promise<SoakResult> {
  const say = opts.progress ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), 'fleetgate-soak-'));
  const fleet = await startFleet(dir, opts.engines);
  const random = seededRandom(opts.seed ^ 0x5eed);
  const ledger = new Ledger();
  const samples: ResourceSample[] = [];
  const faultsDone: DoneFault[] = [];
  const bursts: ClientMode[] = [];
  const open = new Set<Promise<void>>();
  let runner: FaultRunner | null = null;
  try {
    await waitFor(
      async () => {
        const res = await fetch(`${fleet.url}/fleet/status`);
        return ((await res.json()) as { ready: number }).ready === opts.engines;
      },
      { timeoutMs: 120_000, intervalMs: 100, what: `all ${opts.engines} engines ready` },
    );
    say(`fleet ready at ${fleet.url}; ${opts.engines} engines; running ${Math.round(opts.durationMs / 1000)} s`);
    const started = performance.now();
    const now = () => performance.now() - started;
    runner = new FaultRunner({
      url: fleet.url,
      fleetgatePid: fleet.child.pid as number,
      faultDir: dir,
      clientBurst: (mode, count) => {
        for (let i = 0; i < count; i++) bursts.push(mode);
      },
    });
    const sampler = setInterval(async () => {
      const t = now();
      try {
        const text = await (await fetch(`${fleet.url}/metrics`)).text();
        samples.push(parseSample(text, t));
      } catch (error) {
        say(`metrics scrape failed: ${(error as Error).message}`);
      }
    }, 5_000);
    const plan = planFaults({
      seed: opts.seed,
      durationMs: opts.durationMs,
      count: opts.faults,
      engines: opts.engines,
      quietMs: Math.min(20_000, opts.durationMs / 8),
      kinds: opts.kinds,
    });
    const faultTimers = plan.map((fault) =>
      setTimeout(async () => {
        try {
          const done = await (runner as FaultRunner).run(fault, now());
          faultsDone.push(done);
          say(`${(done.atMs / 1000).toFixed(1)} s: ${done.kind} ${done.target ?? ''} (${done.note})`);
        } catch (error) {
          say(`fault ${fault.kind} failed: ${(error as Error).message}`);
        }
      }, fault.atMs),
    );

    let swallowLeft = opts.swallow ?? 0;
    const sendOne = () => {
      const kind = KINDS[Math.floor(random() * KINDS.length)];
      const streamed = kind.endsWith('-stream');
      const mode: ClientMode = streamed && bursts.length > 0 ? (bursts.shift() as ClientMode) : 'normal';
      const sdk = kind.startsWith('chat') && random() < 0.3;
      const client: ClientName = sdk ? 'openai-sdk' : 'fetch';
      const row = ledger.open({ kind, client, mode, tokens: 8 + Math.floor(random() * 40), sentMs: now() });
      const swallowed = swallowLeft > 0 && random() < 0.5;
      if (swallowed) swallowLeft--;
      const deadline = new AbortController();
      const ctx: SendContext = { url: fleet.url, ledger, now, signal: deadline.signal };
      const timer = setTimeout(() => {
        deadline.abort();
        ledger.settle(row, now(), { outcome: 'lost' });
      }, opts.deadlineMs);
      const task = (async () => {
        const result = await (sdk ? sendSdk(row, ctx) : sendHttp(row, ctx));
        // The fake client of the ledger's own test: it got the answer and drops it on the floor.
        if (swallowed) return;
        clearTimeout(timer);
        if (row.outcome !== 'lost') ledger.settle(row, now(), result);
      })().catch((error: unknown) => {
        clearTimeout(timer);
        ledger.settle(row, now(), { outcome: 'unclear', errorType: `soak_${(error as Error).message}` });
      });
      open.add(task);
      void task.finally(() => open.delete(task));
    };

    const total = Math.floor((opts.durationMs / 1000) * opts.rate);
    for (let i = 0; i < total; i++) {
      const at = (i * 1000) / opts.rate;
      const wait = at - now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      sendOne();
      if (i % Math.max(1, Math.round(opts.rate * 30)) === 0 && i > 0) {
        const t = summarize(ledger.rows);
        say(
          `${(now() / 1000).toFixed(0)} s: sent ${t.sent}, whole ${t.completedWhole}, errors ${t.clearErrors}, open ${t.stuck}`,
        );
      }
    }
    for (const timer of faultTimers) clearTimeout(timer);
    // Open requests get their deadline; what is still open after it is stuck.
    const drainEnd = Date.now() + opts.deadlineMs + 5_000;
    while (open.size > 0 && Date.now() < drainEnd) await new Promise((resolve) => setTimeout(resolve, 200));
    clearInterval(sampler);
    const t = now();
    samples.push(parseSample(await (await fetch(`${fleet.url}/metrics`)).text(), t));
  } finally {
    await runner?.cleanup();
    await fleet.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const table = summarize(ledger.rows);
  const resources = compareWindows(samples, opts.windowMs);
  const failures = [...ledgerFailures(table), ...resourceFailures(resources)];
  const errorTimesMs = ledger.rows.filter((r) => r.outcome === 'error').map((r) => r.endedMs ?? r.sentMs);
  const { progress: _progress, ...options } = opts;
  return {
    options,
    table,
    faults: faultsDone,
    faultKinds: countByKind(faultsDone.filter((f) => !f.note.startsWith('skipped'))),
    resources,
    samples,
    failures,
    rows: ledger.rows,
    errorTimesMs,
  };
}
