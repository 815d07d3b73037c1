/**
 * Summarises V8 .cpuprofile files (from `node --cpu-prof`): self time by function, by file and by
 * package, and fleetgate's own functions by inclusive time (self plus what they call); `--folded
 * FILE` also writes the samples as folded stacks (`frame;frame;frame µs` per line), the input of
 * flamegraph.pl, speedscope or inferno. Usage:
 *   node --import tsx bench/profile-summary.ts [--top N] [--folded FILE] FILE_OR_DIR ...
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { markdownTable } from './lib/table.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function files(paths: string[]): string[] {
  return paths.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => join(p, f))
      : [p],
  );
}

function shortUrl(url: string): string {
  if (url === '') return '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return `fleetgate ${url.slice(dist + 1)}`;
  return url.replace(/^file:\/\//, '');
}

/** `node:internal/...` -> `node:*`, `node_modules/@fastify/reply-from/...` -> `@fastify/reply-from`. */
function packageOf(url: string): string {
  if (url === '') return '(native / GC / idle)';
  if (url.startsWith('node:')) return 'node core (JS)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.includes('/dist/')) return `fleetgate ${url.slice(url.indexOf('/dist/') + 6).split('/')[0]}/`;
  return url;
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string' }, folded: { type: 'string' } },
  });
  const top = Number(values.top ?? 30);
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  const byPackage = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const folded = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const file of files(positionals)) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    const parents = new Map<number, number>();
    for (const n of profile.nodes) for (const child of n.children ?? []) parents.set(child, n.id);
    for (let i = 0; i < profile.samples.length; i++) {
      const node = nodes.get(profile.samples[i]);
      const dt = profile.timeDeltas[i] ?? 0;
      if (!node) continue;
      const { functionName, url, lineNumber } = node.callFrame;
      if (functionName === '(idle)') {
        idle += dt;
        continue;
      }
      total += dt;
      const fn = `${functionName || '(anonymous)'} ${shortUrl(url)}${url ? `:${lineNumber + 1}` : ''}`;
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + dt);
      byFile.set(shortUrl(url), (byFile.get(shortUrl(url)) ?? 0) + dt);
      byPackage.set(packageOf(url), (byPackage.get(packageOf(url)) ?? 0) + dt);
      const stack: string[] = [];
      for (let id: number | undefined = node.id; id !== undefined; id = parents.get(id)) {
        const frame = (nodes.get(id) as ProfileNode).callFrame;
        stack.push(`${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}`);
      }
      stack.reverse();
      // Inclusive time once per function per sample, however often it recurs on the stack.
      for (const frame of new Set(stack))
        if (frame.includes(' fleetgate ')) inclusive.set(frame, (inclusive.get(frame) ?? 0) + dt);
      const key = stack.join(';');
      folded.set(key, (folded.get(key) ?? 0) + dt);
    }
  }
  const table = (title: string, map: Map<string, number>, n: number, kind = 'self') => {
    const rows = [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => [name, (us / 1000).toFixed(0), `${((us / total) * 100).toFixed(1)}%`]);
    return `### ${title}\n\n${markdownTable(['', `${kind} ms`, 'share of busy'], rows)}\n`;
  };
  process.stdout.write(
    `busy ${(total / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms\n\n` +
      `${table('by package', byPackage, 20)}\n${table('by file', byFile, 25)}\n${table('by function', byFunction, top)}\n` +
      table("fleetgate's functions by inclusive time", inclusive, top, 'inclusive'),
  );
  if (values.folded) {
    const lines = [...folded.entries()].map(([stack, us]) => `${stack.replaceAll(' ', '_')} ${Math.round(us)}`);
    writeFileSync(values.folded, `${lines.join('\n')}\n`);
  }
}

main();
