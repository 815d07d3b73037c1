/** `fleetgate launch` config mistakes (unknown placeholder, empty command, no launch section) exit 2 naming the key, and start nothing. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runFleetgate } from '../helpers/launch.js';

test('a bad launch template exits 2 naming the key; so does launch without a launch section', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'launch-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const cases: [unknown, RegExp][] = [
    [
      { command: 'python -m sglang.launch_server --port {prot}', ports: 30000 },
      /launch\.command: unknown placeholder \{prot\}/,
    ],
    [{ command: '', ports: 30000 }, /launch\.command: must not be empty/],
    [{ command: 'python x', ports: 30000, log: 'logs/{gpu}.log' }, /launch\.log: unknown placeholder \{gpu\}/],
  ];
  for (const [i, [launch, message]] of cases.entries()) {
    const file = join(dir, `bad${i}.yaml`);
    writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', launch }));
    const run = await runFleetgate(['launch', '--config', file]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, message);
    assert.doesNotMatch(run.stdout, /listening|started/);
  }
  const file = join(dir, 'no-launch.yaml');
  writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', backends: ['http://127.0.0.1:9'] }));
  const run = await runFleetgate(['launch', '--config', file]);
  assert.equal(run.code, 2);
  assert.match(run.stderr, /no launch: section/);
});
