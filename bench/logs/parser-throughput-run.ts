/**
 * Log parser throughput, this tree's parsers against another git ref's (default: the round-2 tree,
 * 4454db3, before the traceback reader), side by side in one run: following 7 busy logs must cost
 * no more with the shared traceback reader.
 *
 *   node --import tsx bench/logs/parser-throughput-run.ts [--mb 1024] [--ref REF] [--rounds 2] [--out FILE]
 *
 * Generates a log of `--mb` MB in /tmp (half SGLang, half vLLM: every real excerpt of the engine in
 * test/fixtures/logs, repeated; tracebacks, progress bars, process tags and runtime lines), reads it
 * the way the log watcher does (256 KiB reads, UTF-8 decoding, `LineSplitter`, one parser per
 * engine) with the old and the new parsers in alternation, and deletes it afterwards. Reports MB/s
 * of each and new/old time ratios; `--out` writes the summary JSON.
 */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { parseArgs } from 'node:util';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import type { LogParser } from '../../src/fleet/logs/log-events.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';
import { fixtureText, loadLogFixtures } from '../../test/helpers/log-fixtures.js';

type Engine = 'sglang' | 'vllm';
type CreateParser = (kind: Engine, fatalPatterns: readonly string[]) => LogParser;

const ROOT = resolve(import.meta.dirname, '../..');
const READ_BYTES = 256 * 1024;

const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '1024' },
    ref: { type: 'string', default: '4454db376ce5b33338ba11df5b916cc5bd5b6230' },
    rounds: { type: 'string', default: '2' },
    out: { type: 'string' },
  },
});
const totalMb = Number(values.mb);
const rounds = Number(values.rounds);
if (!(totalMb > 0) || !(rounds >= 1)) throw new Error('--mb and --rounds must be positive numbers');

/** The other ref's `src/fleet` and `src/config`, extracted to a temporary directory and imported. */
async function loadParserAt(ref: string, into: string): Promise<CreateParser> {
  const archive = execFileSync('git', ['-C', ROOT, 'archive', ref, 'src/fleet', 'src/config'], {
    maxBuffer: 64 * 1024 * 1024,
  });
  mkdirSync(into, { recursive: true });
  execFileSync('tar', ['-x', '-C', into], { input: archive });
  // The log readers moved into src/fleet/logs/; an older ref has them in src/fleet/.
  const moved = join(into, 'src/fleet/logs/log-parser.ts');
  const entry = existsSync(moved) ? moved : join(into, 'src/fleet/log-parser.ts');
  const module = (await import(entry)) as { createLogParser: CreateParser };
  return module.createLogParser;
}

/** Writes `mb` MB of the engine's real excerpts, repeated, to `path`. */
function generateLog(path: string, engine: Engine, mb: number): number {
  const block = Buffer.from(
    loadLogFixtures()
      .filter((fixture) => fixture.engine === engine)
      .map((fixture) => fixtureText(fixture))
      .join(''),
  );
  const target = mb * 1024 * 1024;
  const fd = openSync(path, 'w');
  let written = 0;
  try {
    while (written < target) written += writeSync(fd, block, 0, Math.min(block.length, target - written));
  } finally {
    closeSync(fd);
  }
  return written;
}

/** Reads the file as the log watcher does and feeds every line to a fresh parser; ms taken. */
function timeParse(path: string, engine: Engine, create: CreateParser): { ms: number; lines: number; events: number } {
  const parser = create(engine, []);
  const splitter = new LineSplitter();
  const decoder = new StringDecoder('utf8');
  const buffer = Buffer.alloc(READ_BYTES);
  const fd = openSync(path, 'r');
  let lines = 0;
  let events = 0;
  const started = performance.now();
  try {
    for (let read = readSync(fd, buffer); read > 0; read = readSync(fd, buffer)) {
      for (const line of splitter.push(decoder.write(buffer.subarray(0, read)))) {
        lines++;
        events += parser.push(line).length;
      }
    }
  } finally {
    closeSync(fd);
  }
  return { ms: performance.now() - started, lines, events };
}

const dir = mkdtempSync(join(tmpdir(), 'fleetgate-parser-bench-'));
try {
  const oldParser = await loadParserAt(values.ref, join(dir, 'old'));
  const files = (['sglang', 'vllm'] as const).map((engine) => {
    const path = join(dir, `${engine}.log`);
    return { engine, path, bytes: generateLog(path, engine, totalMb / 2) };
  });
  const results: Record<string, { bytes: number; oldMs: number[]; newMs: number[]; lines: number }> = {};
  for (const { engine, path, bytes } of files) {
    const result = { bytes, oldMs: [] as number[], newMs: [] as number[], lines: 0 };
    // Alternate old and new so that the machine's load at a given moment weighs on both alike.
    for (let round = 0; round < rounds; round++) {
      const old = timeParse(path, engine, oldParser);
      const now = timeParse(path, engine, createLogParser);
      result.oldMs.push(old.ms);
      result.newMs.push(now.ms);
      result.lines = now.lines;
      console.log(
        `${engine} round ${round + 1}: old ${old.ms.toFixed(0)} ms, new ${now.ms.toFixed(0)} ms (${(now.ms / old.ms).toFixed(3)}x)`,
      );
    }
    results[engine] = result;
  }
  const mbps = (bytes: number, ms: number) => bytes / 1024 / 1024 / (ms / 1000);
  const best = (ms: number[]) => Math.min(...ms);
  const summary = {
    benchmark: 'log parser throughput',
    ref: values.ref,
    log_mb: totalMb,
    rounds,
    engines: Object.fromEntries(
      Object.entries(results).map(([engine, r]) => [
        engine,
        {
          mb: r.bytes / 1024 / 1024,
          lines: r.lines,
          old_mb_per_s: mbps(r.bytes, best(r.oldMs)),
          new_mb_per_s: mbps(r.bytes, best(r.newMs)),
          new_over_old_time: best(r.newMs) / best(r.oldMs),
          old_ms: r.oldMs,
          new_ms: r.newMs,
        },
      ]),
    ),
    total: (() => {
      const bytes = Object.values(results).reduce((sum, r) => sum + r.bytes, 0);
      const oldMs = Object.values(results).reduce((sum, r) => sum + best(r.oldMs), 0);
      const newMs = Object.values(results).reduce((sum, r) => sum + best(r.newMs), 0);
      return { old_mb_per_s: mbps(bytes, oldMs), new_mb_per_s: mbps(bytes, newMs), new_over_old_time: newMs / oldMs };
    })(),
  };
  console.log(JSON.stringify(summary.total));
  if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
