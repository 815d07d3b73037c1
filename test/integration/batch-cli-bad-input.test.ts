/**
 * `fleetgate batch` refuses bad input before it sends anything: a malformed line, a duplicate
 * custom_id, an unknown url, a file over the size limit; each exits 2 with an error naming the
 * line, and the engine received no request.
 */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { chatLine, tempDir } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { startReadyFleet } from '../helpers/fleet.js';

const good = (i: number) => chatLine(`req-${i}`);

const cases: Array<{ name: string; lines: string[]; args?: string[]; error: RegExp }> = [
  {
    name: 'malformed line',
    lines: [good(0), good(1), '{"custom_id": "req-2", "method": "POST",'],
    error: /line 3: not valid JSON/,
  },
  {
    name: 'duplicate custom_id',
    lines: [good(0), good(1), good(2), good(1)],
    error: /line 4: duplicate custom_id "req-1" \(first on line 2\)/,
  },
  {
    name: 'unknown url',
    lines: [good(0), JSON.stringify({ custom_id: 'x', method: 'POST', url: '/v1/images', body: {} })],
    error: /line 2: unknown url "\/v1\/images"/,
  },
  {
    name: 'oversized file',
    lines: Array.from({ length: 40 }, (_, i) => good(i)),
    args: ['--max-input-size', '4KiB'],
    error: /line \d+: the input passes the 4KiB limit on this line/,
  },
];

test('bad input: exit 2, the line named, nothing sent', async (t) => {
  const dir = tempDir(t);
  const { url, sims } = await startReadyFleet(t, [{}]);
  for (let i = 0; i < cases.length; i += 2) {
    await Promise.all(
      cases.slice(i, i + 2).map(async (c, j) => {
        const input = join(dir, `input-${i + j}.jsonl`);
        const output = join(dir, `output-${i + j}.jsonl`);
        writeFileSync(input, `${c.lines.join('\n')}\n`);
        const run = spawnCli(['batch', input, '-o', output, '--url', url, ...(c.args ?? [])]);
        assert.equal(await run.closed, 2, `${c.name}: ${run.output()}`);
        assert.match(run.stderr(), c.error, c.name);
        assert.match(run.stderr(), /nothing was sent/, c.name);
        assert.equal(existsSync(output), false, `${c.name}: no output file`);
      }),
    );
  }
  assert.equal(sims[0].counters.requests, 0, 'the engine received no request');
});
