/**
 * Which of fleetgate's source files one streamed chat request runs code in, read from V8's precise
 * coverage (function call counts) around that one request, in a gateway started from the shipped
 * config in this process, over one `fleetgate sim` process. Start-up, warm-up requests and
 * background work (probes, load scrapes) are left out: a file counts when it ran in each of
 * `--runs` requests. Then the order: every function those requests ran gets a logpoint (a
 * breakpoint whose condition records its file and never pauses), and one more request's trail of
 * function entries gives the files in the order it enters them, and the returns: the distinct pairs
 * of files where it comes back from one to a file it had left (the median of `--runs` requests). Issue #53's measure of how far a request
 * travels through the house.
 *
 *   node --import tsx bench/path/request-path-run.ts [--runs 5]
 */
import type { Profiler } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chat } from '../../test/helpers/chat-load.js';
import { startShipped } from '../../test/helpers/shipped.js';
import { startSimProcess } from '../../test/helpers/sim-process.js';
import { waitFor } from '../../test/helpers/wait.js';

const runs = Number(process.argv[process.argv.indexOf('--runs') + 1] || 5);
const cleanups: Array<() => unknown> = [];
const t = { after: (fn: () => unknown) => cleanups.push(fn) };
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

async function streamedChat(url: string): Promise<void> {
  const { status, body } = await chat(url, 16);
  if (status !== 200 || !body.includes('[DONE]')) throw new Error(`${status}: ${body.slice(0, 200)}`);
}

const sim = await startSimProcess(t, 'gpu0');
const { url } = await startShipped(t, 'shipped', [{ url: sim.url, name: sim.name }]);
await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, { what: 'fleetgate ready' });
for (let i = 0; i < 5; i++) await streamedChat(url);

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
const seen: Array<Set<string>> = [];
/** The last request's coverage: the functions it ran. */
let coverage: Profiler.ScriptCoverage[] = [];
for (let run = 0; run < runs; run++) {
  await session.post('Profiler.takePreciseCoverage');
  await streamedChat(url);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const { result } = await session.post('Profiler.takePreciseCoverage');
  coverage = result;
  const ran = new Set<string>();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(SRC) || path.startsWith(`${SRC}sim/`)) continue;
    if (script.functions.some((fn) => fn.functionName !== '' && fn.ranges[0].count > 0)) ran.add(relative(SRC, path));
  }
  seen.push(ran);
}
const files = [...seen[0]].filter((file) => seen.every((ran) => ran.has(file))).sort();
console.log(files.join('\n'));
console.log(`${files.length} files of src/ run by each of ${runs} streamed chat requests`);

// The order: a logpoint at the first breakable place of every function of those files that ran.
await session.post('Profiler.stopPreciseCoverage');
await session.post('Debugger.enable');
const trail: { files?: number[] } = {};
(globalThis as { __fleetgatePathTrail?: typeof trail }).__fleetgatePathTrail = trail;
const names: string[] = [];
for (const script of coverage) {
  if (!script.url.startsWith('file://')) continue;
  const file = relative(SRC, fileURLToPath(script.url));
  if (!files.includes(file)) continue;
  const index = names.push(file) - 1;
  const { scriptSource } = await session.post('Debugger.getScriptSource', { scriptId: script.scriptId });
  const position = (offset: number) => {
    const before = scriptSource.slice(0, offset).split('\n');
    return { scriptId: script.scriptId, lineNumber: before.length - 1, columnNumber: before[before.length - 1].length };
  };
  for (const fn of script.functions) {
    if (fn.ranges[0].count === 0 || fn.ranges[0].startOffset === 0) continue;
    const { locations } = await session.post('Debugger.getPossibleBreakpoints', {
      start: position(fn.ranges[0].startOffset),
      end: position(fn.ranges[0].endOffset),
      restrictToFunction: true,
    });
    if (locations.length === 0) continue;
    const condition = `globalThis.__fleetgatePathTrail.files?.push(${index}), false`;
    await session.post('Debugger.setBreakpoint', { location: locations[0], condition }).catch(() => {});
  }
}
const walks: Array<{ files: number; returns: number; order: string[] }> = [];
for (let run = 0; run < runs; run++) {
  trail.files = [];
  await streamedChat(url);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const entered = trail.files.filter((file, i, all) => i === 0 || all[i - 1] !== file);
  trail.files = undefined;
  // A return: coming back to a file left earlier, counted once per pair of files (an answer's chunks
  // take the same round again and again).
  const visited = new Set<number>();
  const backEdges = new Set<string>();
  for (let i = 0; i < entered.length; i++) {
    if (visited.has(entered[i])) backEdges.add(`${entered[i - 1]}>${entered[i]}`);
    visited.add(entered[i]);
  }
  const returns = backEdges.size;
  walks.push({ files: visited.size, returns, order: entered.map((file) => names[file]) });
}
await session.post('Debugger.disable');
session.disconnect();
walks.sort((a, b) => a.returns - b.returns);
const walk = walks[Math.floor(walks.length / 2)];
console.log(
  `\nentered in this order (the median request by returns), first 60:\n${walk.order.slice(0, 60).join(' → ')}`,
);
console.log(
  `${walk.files} files entered, ${walk.returns} returns (pairs of files) to a file left earlier (each request: ${walks.map((w) => w.returns).join(', ')})`,
);
for (const fn of cleanups) await fn();
