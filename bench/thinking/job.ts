/**
 * One batch job of bench:thinking: `fleetgate batch` (the built CLI, a process of its own) sends
 * every line of the input through fleetgate to the thinking engines; when half the lines are in the
 * output, one engine's process is `kill -9`ed by its PID. Then: what the client saw (errors, lines,
 * duplicates), the tokens the engines generated against the tokens in the output.
 *
 * Counting the killed engine's tokens: its `/metrics` is read right before the kill (the same tick
 * sends SIGKILL once the read returns); what it generated in between is at most one decode step per
 * running request, which `unseenBound` states. Every engine's counter is read once before the job
 * and subtracted (the simulator's start-up warm-up generates a few tokens).
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processCpuSeconds } from '../lib/proc-stats.js';
import { spawnPinned } from '../lib/procs.js';
import { FLEETGATE_CLI } from '../lib/targets.js';
import { type Engine, engineCounters, type Fleet, metricByLabel, metricSum, scrape } from './engines.js';

export interface JobSizes {
  engines: number;
  requests: number;
  /** Answer length in tokens (reasoning included), uniform in [min, max], via `<sim:len=N>`. */
  len: readonly [number, number];
  /** Share of the output lines after which one engine is killed. */
  killAt: number;
  maxSeconds: number;
  seed: number;
}

/** mulberry32: a small seeded generator, the same job for every arm. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TOPICS = ['Paris', 'the Loire valley', 'Lyon', 'Marseille', 'Bordeaux', 'the Alps', 'Normandy', 'Provence'];

/** The job's input (OpenAI Batch JSONL): chat requests whose answers end after N tokens. */
export function writeInput(path: string, sizes: JobSizes, model: string): void {
  const next = rng(sizes.seed);
  const [min, max] = sizes.len;
  const lines: string[] = [];
  for (let i = 0; i < sizes.requests; i++) {
    const n = min + Math.floor(next() * (max - min + 1));
    const topic = TOPICS[Math.floor(next() * TOPICS.length)];
    lines.push(
      JSON.stringify({
        custom_id: `req-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: {
          model,
          messages: [
            { role: 'system', content: 'You are a careful assistant. Think before you answer.' },
            { role: 'user', content: `Question ${i}: what should a visitor know about ${topic}? <sim:len=${n}>` },
          ],
          max_tokens: max + 64,
          temperature: 0.6,
        },
      }),
    );
  }
  writeFileSync(path, `${lines.join('\n')}\n`);
}

/** Counts the lines of a growing file, reading only what was appended since the last call. */
class LineCounter {
  #offset = 0;
  lines = 0;
  readonly #buf = Buffer.alloc(1 << 20);
  constructor(readonly path: string) {}
  poll(): number {
    if (!existsSync(this.path)) return this.lines;
    const fd = openSync(this.path, 'r');
    try {
      for (;;) {
        const n = readSync(fd, this.#buf, 0, this.#buf.length, this.#offset);
        if (n <= 0) break;
        this.#offset += n;
        for (let i = 0; i < n; i++) if (this.#buf[i] === 0x0a) this.lines++;
      }
    } finally {
      closeSync(fd);
    }
    return this.lines;
  }
}

interface OutputSummary {
  lines: number;
  uniqueIds: number;
  duplicates: number;
  missing: number;
  /** Lines whose response is not a 200 with a finished answer. */
  badLines: number;
  completionTokens: number;
  reasoningTokens: number;
  errorLines: number;
}

function reasoningOf(usage: Record<string, unknown>): number {
  const details = usage.completion_tokens_details as Record<string, unknown> | null | undefined;
  const fromDetails = details?.reasoning_tokens;
  if (typeof fromDetails === 'number') return fromDetails;
  return typeof usage.reasoning_tokens === 'number' ? usage.reasoning_tokens : 0;
}

function readOutput(path: string, errorsPath: string, requests: number): OutputSummary {
  const ids = new Set<string>();
  const out: OutputSummary = {
    lines: 0,
    uniqueIds: 0,
    duplicates: 0,
    missing: 0,
    badLines: 0,
    completionTokens: 0,
    reasoningTokens: 0,
    errorLines: 0,
  };
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  for (const line of text.split('\n')) {
    if (line === '') continue;
    out.lines++;
    const row = JSON.parse(line) as {
      custom_id: string;
      response?: {
        status_code?: number;
        body?: { usage?: Record<string, unknown>; choices?: { finish_reason?: string }[] };
      };
    };
    if (ids.has(row.custom_id)) out.duplicates++;
    ids.add(row.custom_id);
    const body = row.response?.body;
    if (row.response?.status_code !== 200 || !body?.usage || !body.choices?.[0]?.finish_reason) out.badLines++;
    const usage = body?.usage ?? {};
    out.completionTokens += typeof usage.completion_tokens === 'number' ? usage.completion_tokens : 0;
    out.reasoningTokens += reasoningOf(usage);
  }
  out.uniqueIds = ids.size;
  for (let i = 0; i < requests; i++) if (!ids.has(`req-${i}`)) out.missing++;
  if (existsSync(errorsPath)) out.errorLines = readFileSync(errorsPath, 'utf8').split('\n').filter(Boolean).length;
  return out;
}

export interface JobResult {
  arm: 'stream-upstream' | 'no-stream-upstream';
  wallSec: number;
  batchExitCode: number | null;
  /** The batch's last progress line (`--json-progress`'s `done` event). */
  batchDone: Record<string, unknown> | null;
  output: OutputSummary;
  /** Client-visible errors: error lines + requests without an answer line + non-200 lines. */
  clientErrors: number;
  kill: {
    engine: string;
    atLines: number;
    /** ms from sending the read of its counter to SIGKILL. */
    readToKillMs: number;
    runningAtKill: number;
    /** Its generated tokens at that read (baseline subtracted). */
    generatedAtRead: number;
    /** At most this many tokens generated after the read: one decode step per running request, per token-ms elapsed. */
    unseenBound: number;
  } | null;
  generatedPerEngine: Record<string, number>;
  generated: number;
  generatedOverOutput: number;
  /** With the killed engine's unseen tokens bounded from above. */
  generatedOverOutputUpper: number;
  reasoningShare: number;
  resumes: number;
  resumeFailures: number;
  /** The counters by label after the job (resumes by why the stream was cut, failures by why refused). */
  resumesByReason: Record<string, number>;
  resumesByBackend: Record<string, number>;
  failuresByReason: Record<string, number>;
  fleetgateCpuSec: number;
  batchCpuSec: number;
}

export interface JobSetup {
  sizes: JobSizes;
  input: string;
  dir: string;
  progress: (line: string) => void;
}

/** Runs the job once with the batch streaming upstream (`stream`) or not, on fresh engines and a fresh fleetgate. */
export async function runJob(setup: JobSetup, fleet: Fleet, stream: boolean): Promise<JobResult> {
  const { sizes, dir, progress } = setup;
  const arm = stream ? 'stream-upstream' : 'no-stream-upstream';
  await fleet.whole();
  const { engines, fleetgate } = fleet;
  const resumesBefore = metricSum(await scrape(fleetgate.urls[0]), 'fleetgate_stream_resumes_total');
  const failuresBefore = metricSum(await scrape(fleetgate.urls[0]), 'fleetgate_stream_resume_failures_total');
  const cpuBefore = fleetgate.proc ? processCpuSeconds(fleetgate.proc.pid) : Number.NaN;
  const baseline = await Promise.all(engines.map(async (e) => (await engineCounters(e)).generated));
  const output = join(dir, `${arm}.jsonl`);
  const errors = join(dir, `${arm}.errors.jsonl`);
  const started = performance.now();
  const batch = spawnPinned(
    'batch',
    process.execPath,
    [
      FLEETGATE_CLI,
      'batch',
      setup.input,
      '-o',
      output,
      '--errors',
      errors,
      '--url',
      fleetgate.urls[0],
      '--json-progress',
      ...(stream ? [] : ['--no-stream-upstream']),
    ],
    { cpu: null, logFile: join(dir, `batch-${arm}.log`), pipeStdout: true },
  );
  let lastProgress = '';
  batch.child.stdout?.on('data', (chunk: Buffer) => {
    const lines = `${lastProgress}${chunk}`.split('\n');
    lastProgress = lines.at(-1) === '' ? (lines.at(-2) ?? '') : (lines.at(-1) ?? '');
  });
  let exitCode: number | null | undefined;
  void batch.exited.then((code) => {
    exitCode = code;
  });
  const counter = new LineCounter(output);
  const killAtLines = Math.max(1, Math.floor(sizes.requests * sizes.killAt));
  const victim: Engine = engines[0];
  let kill: JobResult['kill'] = null;
  let halfAt: number | null = null;
  let batchCpuSec = 0;
  const deadline = Date.now() + sizes.maxSeconds * 1000;
  let lastReport = Date.now();
  while (exitCode === undefined && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, kill === null ? 50 : 250));
    const lines = counter.poll();
    batchCpuSec = processCpuSeconds(batch.pid) || batchCpuSec;
    if (kill === null && lines >= killAtLines) halfAt ??= Date.now();
    // The victim must be busy, running at least half its batch slots (or of its share of what is left): on a loaded
    // machine fleetgate can have taken it out of rotation for a moment after a reset. Wait up to 30 s for it.
    const waiting = kill === null && halfAt !== null ? await engineCounters(victim) : null;
    const share = Math.min(fleet.spec.maxRunning, (sizes.requests - lines) / engines.length) / 2;
    const busy = waiting !== null && waiting.running >= Math.max(1, share);
    if (waiting !== null && halfAt !== null && (busy || Date.now() - halfAt > 30_000)) {
      const read = performance.now();
      const before = await engineCounters(victim);
      process.kill(victim.proc.pid, 'SIGKILL');
      const readToKillMs = performance.now() - read;
      kill = {
        engine: victim.name,
        atLines: lines,
        readToKillMs,
        runningAtKill: before.running,
        generatedAtRead: before.generated - baseline[0],
        unseenBound: before.running * Math.ceil(readToKillMs / Math.max(1, fleet.spec.tokenMs) + 1),
      };
      progress(
        `${arm}: ${lines}/${sizes.requests} lines: kill -9 ${victim.name} (pid ${victim.proc.pid}, ${before.running} running)`,
      );
    }
    if (Date.now() - lastReport > 30_000) {
      lastReport = Date.now();
      progress(`${arm}: ${lines}/${sizes.requests} lines after ${Math.round((performance.now() - started) / 1000)} s`);
    }
  }
  if (exitCode === undefined) {
    await batch.stop(3000);
    throw new Error(`${arm}: the batch did not finish within ${sizes.maxSeconds} s (--max-seconds)`);
  }
  const wallSec = (performance.now() - started) / 1000;
  const generatedPerEngine: Record<string, number> = {};
  for (const [i, engine] of engines.entries()) {
    if (engine === victim && kill !== null) generatedPerEngine[engine.name] = kill.generatedAtRead;
    else generatedPerEngine[engine.name] = (await engineCounters(engine)).generated - baseline[i];
  }
  const fgMetrics = await scrape(fleetgate.urls[0]);
  const fleetgateCpuSec = fleetgate.proc ? processCpuSeconds(fleetgate.proc.pid) - cpuBefore : Number.NaN;
  const summary = readOutput(output, errors, sizes.requests);
  const generated = Object.values(generatedPerEngine).reduce((a, b) => a + b, 0);
  let batchDone: Record<string, unknown> | null = null;
  try {
    batchDone = JSON.parse(lastProgress) as Record<string, unknown>;
  } catch {
    // no progress line
  }
  return {
    arm,
    wallSec,
    batchExitCode: exitCode,
    batchDone,
    output: summary,
    clientErrors: summary.errorLines + summary.missing + summary.badLines,
    kill,
    generatedPerEngine,
    generated,
    generatedOverOutput: generated / summary.completionTokens,
    generatedOverOutputUpper: (generated + (kill?.unseenBound ?? 0)) / summary.completionTokens,
    reasoningShare: summary.reasoningTokens / summary.completionTokens,
    resumes: metricSum(fgMetrics, 'fleetgate_stream_resumes_total') - resumesBefore,
    resumeFailures: metricSum(fgMetrics, 'fleetgate_stream_resume_failures_total') - failuresBefore,
    resumesByReason: metricByLabel(fgMetrics, 'fleetgate_stream_resumes_total', 'reason'),
    resumesByBackend: metricByLabel(fgMetrics, 'fleetgate_stream_resumes_total', 'backend'),
    failuresByReason: metricByLabel(fgMetrics, 'fleetgate_stream_resume_failures_total', 'reason'),
    fleetgateCpuSec,
    batchCpuSec,
  };
}
