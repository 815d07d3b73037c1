/**
 * SIGHUP to a real `fleetgate serve` re-reads its config file: a backend written into the file
 * joins; an invalid file is refused (logged with the reason) and the process keeps running on the
 * old config.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { createSims } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const yaml = (urls: string[]) =>
  `backends:\n${urls.map((url, i) => `  - url: ${url}\n    name: gpu${i}\n`).join('')}health:\n  starting_interval: 100ms\nlog:\n  access: false\n`;

test('SIGHUP reloads the config file; an invalid file is refused and the old config stays', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-sighup-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sims = await createSims(t, [{}, {}]);
  for (const sim of sims) sim.start();
  await Promise.all(sims.map((sim) => sim.whenReady()));
  const file = join(dir, 'fleetgate.yaml');
  await writeFile(file, yaml([sims[0].url]));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...fleetgateEntry(), 'serve', '--config', file, '--listen', `127.0.0.1:${port}`],
    { cwd: join(import.meta.dirname, '../..'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const names = async () => {
    const status = (await (await fetch(`http://127.0.0.1:${port}/fleet/status`)).json()) as {
      ready: number;
      backends: { name: string }[];
    };
    return { ready: status.ready, names: status.backends.map((b) => b.name) };
  };
  await waitFor(async () => (await names()).ready === 1, { timeoutMs: 15_000, what: `serve up: ${out}` });

  await writeFile(file, yaml([sims[0].url, sims[1].url]));
  child.kill('SIGHUP');
  await waitFor(async () => (await names()).ready === 2, { what: `second backend after SIGHUP: ${out}` });
  assert.deepEqual((await names()).names, ['gpu0', 'gpu1']);
  assert.match(out, /"added":\["gpu1"\]/);

  await writeFile(file, 'backends:\n  - url: http://10.0.0.1\n');
  child.kill('SIGHUP');
  await waitFor(() => /config rejected/.test(out), { what: `the refusal logged: ${out}` });
  assert.match(out, /backends\[0\]\.url: .*has no port/);
  assert.deepEqual((await names()).names, ['gpu0', 'gpu1'], 'the running config stays');
  assert.equal(child.exitCode, null, 'still running');

  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});
