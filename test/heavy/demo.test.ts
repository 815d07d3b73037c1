/**
 * `fleetgate demo` as a user runs it: within a minute 6 of 7 backends are ready, gpu3 (CUDA OOM
 * during graph capture) is kept out until fleetgate launch restarts it with the remedy and it is
 * ready, a request through the proxy streams an answer, and Ctrl-C stops everything with exit code 0.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { request } from 'undici';
import { chat } from '../helpers/chat-load.js';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { HEAVY } from '../helpers/heavy.js';
import { freePort, freePortRange, portFree } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

interface Status {
  ready: number;
  backends: Array<{
    name: string;
    state: string;
    reason: string | null;
    supervision?: { pid: number | null; restarts: number; remedy: string | null } | null;
  }>;
}

test(
  'fleetgate demo: 6/7 ready within a minute, the OOM one kept out until relaunched, curl streams',
  HEAVY,
  async (t) => {
    const port = await freePort();
    const basePort = await freePortRange(7);
    const child = spawn(
      process.execPath,
      [...fleetgateEntry(), 'demo', '--port', String(port), '--base-port', String(basePort)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(() => output.includes('Ctrl-C stops everything'), { timeoutMs: 60_000, what: 'the demo banner' });
    assert.match(output, new RegExp(`curl -N ${url}/v1/chat/completions`));

    const status = async () => (await (await request(`${url}/fleet/status`)).body.json()) as Status;
    const gpu3 = (s: Status) => s.backends.find((b) => b.name === 'gpu3');
    let sawFailed = false;
    let gpu3ReadyEarly = false;
    await waitFor(
      async () => {
        const s = await status();
        if (gpu3(s)?.state === 'failed') sawFailed = true;
        if (gpu3(s)?.state === 'ready' && !sawFailed) gpu3ReadyEarly = true;
        return s.ready >= 6;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: '6 of 7 ready' },
    );
    assert.equal(gpu3ReadyEarly, false, 'gpu3 was never admitted before it failed');

    const { status: code, body } = await chat(url, 8);
    assert.equal(code, 200);
    assert.ok(body.split('\n\n').filter((e) => e.startsWith('data: {')).length >= 8);
    assert.ok(body.endsWith('data: [DONE]\n\n'));

    await waitFor(async () => (await status()).ready === 7, {
      timeoutMs: 45_000,
      intervalMs: 250,
      what: 'gpu3 restarted by fleetgate',
    }).catch(async (error: Error) => {
      const notReady = (await status()).backends.filter((b) => b.state !== 'ready');
      throw new Error(
        `${error.message}; not ready: ${JSON.stringify(notReady)}; demo output ends:\n${output.slice(-3000)}`,
      );
    });
    assert.ok(sawFailed || /gpu3: \w+ -> failed/.test(output), 'gpu3 went through failed');
    assert.match(output, /gpu3: starting -> failed \(.*CUDA out of memory/);
    const restarted = gpu3(await status());
    assert.equal(restarted?.supervision?.restarts, 1, 'restarted once by fleetgate launch');
    assert.equal(restarted?.supervision?.remedy, '--mem-fraction-static 0.88 -> 0.83', 'with the remedy');
    const pids = (await status()).backends.map((b) => b.supervision?.pid);
    assert.ok(
      pids.every((pid) => typeof pid === 'number'),
      'each backend is its own process',
    );

    child.kill('SIGINT');
    assert.equal(await exited, 0);
    assert.ok(await portFree(port), 'proxy port released');
    assert.ok(await portFree(basePort + 3), 'simulated servers stopped');
    for (const pid of pids) assert.throws(() => process.kill(pid as number, 0), `engine ${pid} stopped`);
  },
);
