/** bench/flamegraph.ts: folded stacks drawn as boxes as wide as their samples, coloured by owner. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

test('flamegraph: each frame as wide as its samples, callers above callees, fleetgate orange', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flamegraph-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const folded = join(dir, 'a.folded');
  writeFileSync(
    folded,
    [
      'main_node:x;handler_fleetgate_dist/proxy/a.js 300',
      'main_node:x;writev_(native) 100',
      '(garbage_collector)_(native) 400',
      'bad line',
    ].join('\n'),
  );
  const svg = execFileSync(process.execPath, ['--import', 'tsx', 'bench/flamegraph.ts', '--title', 'T<1>', folded], {
    encoding: 'utf8',
  });
  const box = (name: string) => {
    const match = new RegExp(
      `<title>${name} \\(([\\d.]+)%\\)</title><rect x="([\\d.]+)" y="(\\d+)" width="([\\d.]+)"[^>]*fill="([^"]+)"`,
    ).exec(svg);
    assert.ok(match, `a box for ${name}`);
    return {
      share: Number(match[1]),
      x: Number(match[2]),
      y: Number(match[3]),
      width: Number(match[4]),
      fill: match[5],
    };
  };
  const all = box('all');
  const main = box('main node:x');
  const handler = box('handler fleetgate dist/proxy/a.js');
  const gc = box('\\(garbage collector\\) \\(native\\)');
  assert.equal(all.width, 1600);
  assert.equal(main.width, 800, 'half the samples, half the width');
  assert.equal(handler.width, 600);
  assert.equal(gc.width, 800);
  assert.equal(main.share, 50);
  assert.ok(handler.y > main.y && main.y > all.y, 'top down: the callee below its caller');
  assert.equal(handler.x, main.x, 'the widest callee first, at its caller’s left edge');
  assert.equal(handler.fill, '#f28e2b');
  assert.equal(gc.fill, '#e15759');
  assert.ok(svg.includes('T&lt;1&gt;'), 'the title escaped');
});
