/** `fleetgate sim`: flag errors exit 2 with a message naming the flag; a real run serves until SIGTERM, then exits 0. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseDurationFlag, parseFailure, parsePorts, parseSimArgs, run } from '../../src/cli/sim.js';
import { fleetgateEntry } from '../helpers/cli-entry.js';
import { freePorts } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function probe(url: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

test('flag parsing helpers', () => {
  assert.deepEqual(parsePorts('30000-30002'), [30000, 30001, 30002]);
  assert.deepEqual(parsePorts('30000,30005'), [30000, 30005]);
  assert.equal(parseDurationFlag('250ms', '--x'), 250);
  assert.equal(parseDurationFlag('2s', '--x'), 2000);
  assert.equal(parseDurationFlag('1.5m', '--x'), 90_000);
  assert.deepEqual(parseFailure('3:cuda_oom_capture', 7), [3, { mode: 'cuda_oom_capture', atBatch: undefined }]);
  assert.deepEqual(parseFailure('2:hang_capture:10', 7), [2, { mode: 'hang_capture', atBatch: 10 }]);
  assert.deepEqual(parseFailure('0:crash_after_ready:30s', 1), [0, { mode: 'crash_after_ready', afterMs: 30_000 }]);
  assert.deepEqual(parseFailure('1:not_enough_memory', 2), [1, { mode: 'not_enough_memory' }]);
});

test('bad flags exit 2 with a message naming the flag, nothing started', async (t) => {
  const written: string[] = [];
  t.mock.method(process.stderr, 'write', (chunk: string) => {
    written.push(String(chunk));
    return true;
  });
  const cases: [string[], RegExp][] = [
    [[], /give --ports/],
    [['--ports', '30005-30001'], /--ports: range '30005-30001' runs backwards/],
    [['--port', '70000'], /--port: '70000' is not a port/],
    [['--port', '30000', '--fail', '0:explode'], /--fail: unknown mode 'explode'/],
    [['--port', '30000', '--fail', '4:not_enough_memory'], /--fail: server index 4 is out of range 0-0/],
    [['--port', '30000', '--speed', 'warp'], /--speed: 'warp' must be one of fast, demo, realistic/],
    [['--port', '30000', '--token-ms', 'soon'], /--token-ms: 'soon' must be a number/],
    [['--port', '30000', '--stagger', '5 parsecs'], /--stagger: '5 parsecs' is not a duration/],
    [['--port', '30000', '--kind', 'tgi'], /--kind: 'tgi' must be sglang or vllm/],
    [['--bogus'], /bogus/],
  ];
  for (const [argv, message] of cases) {
    written.length = 0;
    assert.equal(await run(argv), 2, argv.join(' '));
    assert.match(written.join(''), message);
  }
});

test('a real run serves the fleet, writes one log per GPU, and exits 0 on SIGTERM', async (t) => {
  const ports = await freePorts(2);
  const logDir = join(dir, 'logs');
  const child = spawn(
    process.execPath,
    [
      ...fleetgateEntry(),
      'sim',
      '--ports',
      ports.join(','),
      '--speed',
      'fast',
      '--log-dir',
      logDir,
      '--fail',
      '1:not_enough_memory',
    ],
    { cwd: join(import.meta.dirname, '../..'), stdio: ['ignore', 'pipe', 'pipe'] },
  );
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
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await waitFor(() => out.includes('gpu0: ready') && out.includes('gpu1: exited'), {
    timeoutMs: 15_000,
    what: `ready lines in: ${out}`,
  });
  assert.equal(await probe(`http://127.0.0.1:${ports[0]}/health`), 200);
  assert.equal(await probe(`http://127.0.0.1:${ports[1]}/health`), 'ECONNREFUSED');
  assert.ok(existsSync(join(logDir, 'sglang_gpu0.log')));
  assert.match(readFileSync(join(logDir, 'sglang_gpu1.log'), 'utf8'), /RuntimeError: Not enough memory/);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
  assert.equal(await probe(`http://127.0.0.1:${ports[0]}/health`), 'ECONNREFUSED');
});

test('--slow-on NAME:FACTOR slows only the engine named NAME (one command line for a whole launched fleet)', () => {
  const slowdownOf = (name: string) =>
    parseSimArgs(['--port', '30005', '--name', name, '--slow-on', 'gpu5:3'])?.options[0]?.engine?.slowdown;
  assert.equal(slowdownOf('gpu5'), 3);
  assert.equal(slowdownOf('gpu4'), 1, 'the others at normal speed');
  assert.throws(() => parseSimArgs(['--port', '30005', '--name', 'gpu5', '--slow-on', 'gpu5']), /NAME:FACTOR/);
});
