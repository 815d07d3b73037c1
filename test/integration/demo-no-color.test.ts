/**
 * `npm run demo | cat`: with its output piped (not a terminal), the demo writes no escape codes;
 * FORCE_COLOR=1 brings the log's colours back, which shows the check can see them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plainEnv, spawnCli } from '../helpers/cli.js';
import { freePort, freePortRange } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

/** The demo's output up to the proxy URL line and its first log line, then the demo stopped by its PID. */
async function demoOutput(t: test.TestContext, env: NodeJS.ProcessEnv): Promise<string> {
  const port = await freePort();
  const basePort = await freePortRange(1);
  const demo = spawnCli(['demo', '--port', String(port), '--base-port', String(basePort), '--backends', '1'], env);
  t.after(() => {
    if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill('SIGKILL');
  });
  await waitFor(() => demo.output().includes(`proxy        http://127.0.0.1:${port}`), {
    timeoutMs: 60_000,
    what: 'the proxy URL line',
  });
  // The logger's lines are the coloured part: wait for one so the check covers it.
  await waitFor(() => /INFO.*gpu0: down -> starting/.test(demo.output()), { timeoutMs: 30_000, what: 'a log line' });
  assert.ok(demo.child.pid !== undefined);
  process.kill(demo.child.pid, 'SIGINT');
  assert.equal(await demo.closed, 0);
  return demo.output();
}

test('demo piped writes no escape codes; FORCE_COLOR=1 colours its log lines', async (t) => {
  const piped = await demoOutput(t, plainEnv());
  assert.ok(!piped.includes('\x1b'), `escape codes in piped output: ${JSON.stringify(piped.slice(0, 400))}`);
  const forced = await demoOutput(t, plainEnv({ FORCE_COLOR: '1' }));
  assert.ok(forced.includes('\x1b['), 'FORCE_COLOR=1 colours the log lines');
});
