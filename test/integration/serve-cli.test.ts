/** `fleetgate serve` as a process: bad config exits 2; /readyz follows min_ready; SIGTERM drains in-flight streams, exits 0. */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { test } from 'node:test';
import { request } from 'undici';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { createSims } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

function serve(args: string[]): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  const child = spawn(process.execPath, [...fleetgateEntry(), 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exit };
}

test('a bad flag value exits 2 naming the key, and starts nothing', async () => {
  const { exit, output } = serve(['--set', 'health.interval=fast', '--listen', '127.0.0.1:0']);
  assert.equal(await exit, 2);
  assert.match(output(), /health\.interval: "fast" is not a duration/);
  assert.doesNotMatch(output(), /listening/);
});

test('serve: /readyz follows min_ready; SIGTERM: /readyz 503, the in-flight stream finishes, exit 0', async (t) => {
  const sims = await createSims(t, [{ engine: { tokenMs: 10 } }, { engine: { tokenMs: 10 } }]);
  const proc = serve([
    '--listen',
    '127.0.0.1:0',
    '--backend',
    sims.map((s) => s.url).join(','),
    '--set',
    'health.starting_interval=100ms',
    '--set',
    'min_ready=2',
  ]);
  t.after(() => {
    if (proc.child.exitCode === null) proc.child.kill('SIGKILL');
  });
  const url = await waitFor(() => /"url":"(http:[^"]+)"/.exec(proc.output())?.[1], {
    timeoutMs: 30_000,
    what: 'the listen line',
  });

  const readyz = async () => {
    const res = await request(`${url}/readyz`);
    return { status: res.statusCode, body: (await res.body.json()) as { ready: number; min_ready: number } };
  };
  assert.equal((await readyz()).status, 503);
  const live = await request(`${url}/livez`);
  assert.equal(live.statusCode, 200);
  await live.body.text();
  sims[0].start();
  await waitFor(async () => (await readyz()).body.ready === 1, { what: 'one ready' });
  assert.equal((await readyz()).status, 503, 'one ready is below min_ready 2');
  sims[1].start();
  await waitFor(async () => (await readyz()).status === 200, { what: 'two ready' });
  const health = await request(`${url}/health`);
  assert.equal(health.statusCode, 200, '/health answers like /readyz, for scripts that poll it');
  await health.body.text();

  const res = await request(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt: 'x', stream: true, max_tokens: 60 }),
  });
  const chunks: string[] = [];
  const reading = (async () => {
    for await (const chunk of res.body) chunks.push(String(chunk));
  })();
  await waitFor(() => chunks.length > 2, { what: 'stream started' });
  proc.child.kill('SIGTERM');
  await waitFor(() => /draining/.test(proc.output()), { what: 'the drain line' });
  // The listener stays open while the stream drains: a load balancer reads the 503 and stops sending.
  const draining = await readyz();
  assert.equal(draining.status, 503, 'not ready from the signal on');
  assert.equal((draining.body as unknown as { status: string }).status, 'draining');
  await reading;
  assert.ok(chunks.join('').endsWith('data: [DONE]\n\n'), 'the in-flight stream finished');
  assert.equal(await proc.exit, 0);
});
