/**
 * Which of fleetgate's source files one streamed chat request runs code in, read from V8's precise
 * coverage (function call counts) around that one request, in a gateway started from the shipped
 * config in this process, over one `fleetgate sim` process. Start-up, warm-up requests and
 * background work (probes, load scrapes) are left out: a file counts when it ran in each of
 * `--runs` requests. Issue #53's measure of how far a request travels through the house.
 *
 *   node --import tsx bench/path/request-path-run.ts [--runs 5]
 */
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
for (let run = 0; run < runs; run++) {
  await session.post('Profiler.takePreciseCoverage');
  await streamedChat(url);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const ran = new Set<string>();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(SRC) || path.startsWith(`${SRC}sim/`)) continue;
    if (script.functions.some((fn) => fn.functionName !== '' && fn.ranges[0].count > 0)) ran.add(relative(SRC, path));
  }
  seen.push(ran);
}
session.disconnect();
const files = [...seen[0]].filter((file) => seen.every((ran) => ran.has(file))).sort();
console.log(files.join('\n'));
console.log(`${files.length} files of src/ run by each of ${runs} streamed chat requests`);
for (const fn of cleanups) await fn();
