/**
 * A backend whose engine dies during start-up with only a bare traceback (no crash head) is
 * `failed` with the traceback's final exception line as its reason, in `/fleet/status` and in
 * `fleetgate status`, not `down`: over the real log follower, with a real log file written in
 * bursts (lines of a real excerpt, test/fixtures/logs) and a real port that goes away.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Gateway } from '../../src/app.js';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { startGateway } from '../helpers/fleet.js';
import { fixtureText, loadLogFixtures } from '../helpers/log-fixtures.js';
import { freePort } from '../helpers/net.js';
import { sampleValue } from '../helpers/prometheus-text.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = join(import.meta.dirname, '../..');

function fixtureLines(file: string): string[] {
  const fixture = loadLogFixtures().find((f) => f.file === file);
  assert.ok(fixture, file);
  return fixtureText(fixture).replace(/\n$/, '').split('\n');
}

/** An engine's HTTP port during start-up: answers 503 until it is closed (the process is gone). */
async function startingPort(port: number): Promise<{ close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"starting"}');
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function fleetgateStatus(url: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...fleetgateEntry(), 'status', '--url', url],
      { cwd: ROOT, env: { ...process.env, FLEETGATE_URL: '', NO_COLOR: '1', COLUMNS: '400' } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function tempLog(t: { after(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-startup-failure-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'vllm_gpu0.log');
  await writeFile(path, '');
  return path;
}

/** Appends `lines` and waits until the lifecycle has read the last of them. */
async function writeBurst(gateway: Gateway, path: string, lines: string[]): Promise<void> {
  await appendFile(path, `${lines.join('\n')}\n`);
  const last = lines.filter((line) => line.trim() !== '').at(-1) ?? '';
  await waitFor(
    () => gateway.fleet.registry.get('gpu0')?.lifecycle.snapshot.lastLogLine?.startsWith(last.slice(0, 200)),
    {
      timeoutMs: 5_000,
      what: 'the burst read',
    },
  );
}

test('vLLM V1 engine core dies with a tagged bare traceback, then its port goes away: failed, the exception as reason', async (t) => {
  const port = await freePort();
  const engine = await startingPort(port);
  t.after(() => engine.close());
  const path = await tempLog(t);
  const { gateway, url } = await startGateway(t, {
    backends: [{ url: `http://127.0.0.1:${port}`, name: 'gpu0', kind: 'vllm', log: path }],
    // The quiet rule must not be what decides here: only the port going away.
    health: { starting_interval: '100ms', failure_quiet: '10m' },
  });
  const backend = () => gateway.fleet.registry.get('gpu0');
  await waitFor(() => backend()?.state === 'starting', { timeoutMs: 5_000, what: 'the port answering 503' });

  // vllm#28910: the engine core's logged traceback ends, then `Process EngineCore_DP0:` and its bare one.
  const lines = fixtureLines('vllm-28910-enginecore-dp0-bare-traceback.log');
  await writeBurst(gateway, path, lines.slice(0, 3));
  await writeBurst(gateway, path, lines.slice(3));
  assert.equal(backend()?.state, 'starting', 'a suspect alone does not fail it');

  await engine.close();
  await waitFor(() => backend()?.state === 'failed', { timeoutMs: 5_000, what: 'failed once the port is gone' });
  const expected =
    'Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.';
  assert.equal(backend()?.lifecycle.snapshot.reason, expected);

  const status = (await (await fetch(`${url}/fleet/status`)).json()) as {
    backends: Array<{ name: string; state: string; reason: string | null }>;
  };
  const gpu0 = status.backends.find((b) => b.name === 'gpu0');
  assert.equal(gpu0?.state, 'failed');
  assert.equal(gpu0?.reason, expected);

  const cli = await fleetgateStatus(url);
  const row = cli.stdout.split('\n').find((line) => line.startsWith('gpu0'));
  assert.ok(row, cli.stdout + cli.stderr);
  assert.match(row, /\bfailed\b/);
  assert.ok(row.includes('Exception: WorkerProc initialization failed'), row);

  const metrics = await (await fetch(`${url}/metrics`)).text();
  assert.equal(
    sampleValue(metrics, 'fleetgate_startup_failure_verdicts_total', { backend: 'gpu0', by: 'port_down' }),
    1,
  );
});

test('SGLang dies with a bare traceback and no head, its port never open: failed after failure_quiet', async (t) => {
  const port = await freePort();
  const path = await tempLog(t);
  const { gateway } = await startGateway(t, {
    backends: [{ url: `http://127.0.0.1:${port}`, name: 'gpu0', kind: 'sglang', log: path }],
    health: { failure_quiet: '1s' },
  });
  const backend = () => gateway.fleet.registry.get('gpu0');
  const lines = fixtureLines('sglang-8974-nccl-unindented-traceback.log');
  await writeBurst(gateway, path, lines);
  const written = performance.now();
  await waitFor(() => backend()?.state === 'failed', { timeoutMs: 6_000, what: 'failed after the quiet' });
  assert.ok(performance.now() - written >= 900, 'not before failure_quiet');
  assert.equal(
    backend()?.lifecycle.snapshot.reason,
    'RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)',
  );
});
