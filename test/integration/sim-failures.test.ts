/**
 * Scripted failures as an outside client and a log reader see them: fatal start-up errors that
 * exit with the port never open, a capture that hangs, a warm-up that fails, and after-ready
 * crashes (stream cut without [DONE]), dead schedulers behind a live HTTP server, and hangs.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { get, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { SimServer } from '../../src/sim/index.js';
import type { SimOptions } from '../../src/sim/types.js';
import { freePort } from '../helpers/net.js';
import { once, waitFor } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-failures-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function launch(
  t: { after(fn: () => Promise<void>): void },
  opts: Partial<SimOptions>,
  file: string,
): Promise<{ server: SimServer; log: () => string }> {
  const logFile = join(dir, file);
  const server = new SimServer({ port: await freePort(), logFile, ...opts });
  t.after(() => server.stop());
  server.start();
  return { server, log: () => readFileSync(logFile, 'utf8') };
}

/** GET on a fresh connection: the status, the connect error code, or 'TimeoutError'. */
function probe(url: string, timeoutMs = 2000): Promise<number | string> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => {
      req.destroy();
      resolve('TimeoutError');
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

const logHas = (log: () => string, text: string) =>
  waitFor(() => log().includes(text), { timeoutMs: 2000, what: text });

test('not_enough_memory: traceback after Load weight end, sigquit line, exit, port never opens', async (t) => {
  const { server, log } = await launch(t, { failure: { mode: 'not_enough_memory' } }, 'nem.log');
  const reason = await once<string>(server, 'exit', 3000);
  assert.match(reason, /Not enough memory/);
  assert.equal(server.status, 'exited');
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  const text = log();
  const at = (s: string) => text.indexOf(s);
  assert.ok(at('Load weight end') > 0);
  assert.ok(at('Scheduler hit an exception: Traceback (most recent call last):') > at('Load weight end'));
  assert.ok(
    at('RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.') >
      at('Scheduler hit an exception'),
  );
  assert.ok(
    at('Received sigquit from a child process. It usually means the child failed.') > at('RuntimeError: Not enough'),
  );
  assert.equal(at('KV Cache is allocated'), -1);
  assert.equal(at('Uvicorn running'), -1);
  await assert.rejects(server.whenReady(100), /exited before ready/);
});

test('cuda_oom_capture: the capture bar stops, the exception and hints are logged, the process exits', async (t) => {
  const { server, log } = await launch(
    t,
    { failure: { mode: 'cuda_oom_capture', atBatch: 2 }, timing: { graphBatches: 6 } },
    'oom.log',
  );
  const reason = await once<string>(server, 'exit', 3000);
  assert.match(reason, /Capture cuda graph failed/);
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  const text = log();
  assert.match(text, / 2\/6 \[[^\]]+\]\n\[[^\]]+ TP0\] Scheduler hit an exception: Traceback/);
  assert.ok(!text.includes(' 3/6 ['));
  for (const line of [
    'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB.',
    'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB.',
    'Possible solutions:',
    '1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)',
    '4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)',
    'Received sigquit from a child process. It usually means the child failed.',
  ]) {
    assert.ok(text.includes(line), line);
  }
  assert.ok(!text.includes('Capture target decode CUDA graph end'));
});

test('hang_capture: the bar stops and nothing more is printed; the port stays closed', async (t) => {
  const { server, log } = await launch(
    t,
    { failure: { mode: 'hang_capture', atBatch: 1 }, timing: { graphBatches: 4 } },
    'hang-capture.log',
  );
  await waitFor(() => server.status === 'hung', { timeoutMs: 3000 });
  await waitFor(() => log().includes(' 1/4 ['), { timeoutMs: 2000 });
  // The log is written through a stream: let what was printed before the hang reach the file.
  let size = -1;
  await waitFor(
    async () => {
      const before = statSync(join(dir, 'hang-capture.log')).size;
      await new Promise((resolve) => setTimeout(resolve, 30));
      size = statSync(join(dir, 'hang-capture.log')).size;
      return size === before;
    },
    { timeoutMs: 2000, what: 'the log to settle' },
  );
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  // Give a healthy launch ample time to finish, then check nothing more was written.
  await assert.rejects(server.whenReady(150), /not ready after 150 ms/);
  assert.equal(statSync(join(dir, 'hang-capture.log')).size, size);
  assert.ok(!log().endsWith('\n'), 'the bar line is left unterminated');
});

test('warmup_failure: HTTP comes up, then `Initialization failed. warmup error` and the port closes', async (t) => {
  const { server, log } = await launch(
    t,
    { failure: { mode: 'warmup_failure' }, timing: { warmupMs: 200 } },
    'warmup.log',
  );
  await waitFor(() => server.status === 'warming_up', { timeoutMs: 3000 });
  assert.equal(await probe(`${server.url}/health`), 503);
  const reason = await once<string>(server, 'exit', 3000);
  assert.match(reason, /warmup error/);
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  assert.match(
    log(),
    /Uvicorn running on[^\n]+\n[\s\S]*\] Initialization failed\. warmup error: Traceback \(most recent call last\):\n/,
  );
  assert.ok(!log().includes('ready to roll'));
});

/** POSTs a stream and resolves once `chunks` data events arrived; `done` settles when it ends or breaks. */
function openStream(url: string, body: object, chunks: number) {
  let text = '';
  let count = 0;
  let onEnough: () => void = () => {};
  const enough = new Promise<void>((resolve) => {
    onEnough = resolve;
  });
  const done = new Promise<{ text: string; complete: boolean }>((resolve) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (++count === chunks) onEnough();
      });
      res.on('end', () => resolve({ text, complete: true }));
      res.on('error', () => resolve({ text, complete: false }));
      res.on('aborted', () => resolve({ text, complete: false }));
    });
    req.on('error', () => resolve({ text, complete: false }));
    req.end(JSON.stringify(body));
  });
  return { enough, done };
}

test('crash(): mid-stream the connection drops without [DONE]; the port closes; the log shows the exception', async (t) => {
  const { server, log } = await launch(t, { engine: { tokenMs: 5 } }, 'crash.log');
  await server.whenReady(3000);
  const stream = openStream(
    `${server.url}/v1/chat/completions`,
    { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 500, stream: true },
    3,
  );
  await stream.enough;
  const exit = once<string>(server, 'exit', 3000);
  await server.crash('RuntimeError: CUDA error: an illegal memory access was encountered');
  const result = await stream.done;
  assert.equal(result.complete, false);
  assert.ok(result.text.includes('"content":" Paris"'));
  assert.ok(!result.text.includes('[DONE]'));
  assert.match(await exit, /Scheduler hit an exception/);
  assert.equal(server.status, 'exited');
  assert.equal(server.counters.clientDisconnects, 0, 'a crash is not a client disconnect');
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  assert.match(
    log(),
    /TP0\] Scheduler hit an exception: Traceback \(most recent call last\):\n[\s\S]*RuntimeError: CUDA error: an illegal memory access was encountered\n/,
  );
  assert.match(log(), /SIGQUIT received\. signum=None, frame=None\. It usually means one child failed\./);
});

test('crash_after_ready fires by itself and restartAfterMs relaunches with a fresh log, without the failure', async (t) => {
  const { server, log } = await launch(
    t,
    { failure: { mode: 'crash_after_ready', afterMs: 30 }, restartAfterMs: 50 },
    'flap.log',
  );
  await once(server, 'ready', 3000);
  assert.match(await once<string>(server, 'exit', 3000), /Scheduler hit an exception/);
  assert.equal(await probe(`${server.url}/health`), 'ECONNREFUSED');
  await once(server, 'ready', 3000);
  assert.equal(await probe(`${server.url}/health`), 200);
  const text = log();
  assert.ok(text.startsWith('['), 'the relaunch truncated the log');
  assert.ok(text.includes('server_args=ServerArgs('));
  assert.ok(!text.includes('Scheduler hit an exception'));
  assert.equal(text.split('ready to roll').length, 2);
  assert.equal(server.options.failure, null);
});

test('scheduler_dead_http_alive (old): /health stays 200, generation hangs, /health_generate fails after its timeout', async (t) => {
  const { server, log } = await launch(
    t,
    { version: 'old', failure: { mode: 'scheduler_dead_http_alive', afterMs: 10 }, timing: { healthTimeoutMs: 100 } },
    'dead-old.log',
  );
  await waitFor(() => server.status === 'failed', { timeoutMs: 3000 });
  await logHas(log, 'Scheduler hit an exception: Traceback');
  assert.ok(!log().includes('SIGQUIT'));
  assert.equal(await probe(`${server.url}/health`), 200);
  assert.equal(await probe(`${server.url}/v1/models`), 200);
  assert.equal(await probe(`${server.url}/get_model_info`), 200);
  const gen = await fetch(`${server.url}/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x' }),
    signal: AbortSignal.timeout(200),
  }).then(
    () => 'answered',
    (error: Error) => error.name,
  );
  assert.equal(gen, 'TimeoutError');
  assert.equal(await probe(`${server.url}/health_generate`), 503);
  await logHas(log, "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.");
});

test('scheduler_dead_http_alive (new): /health answers 503 after the probe times out', async (t) => {
  const { server } = await launch(
    t,
    { failure: { mode: 'scheduler_dead_http_alive', afterMs: 10 }, timing: { healthTimeoutMs: 80 } },
    'dead-new.log',
  );
  await waitFor(() => server.status === 'failed', { timeoutMs: 3000 });
  const start = performance.now();
  assert.equal(await probe(`${server.url}/health`), 503);
  assert.ok(performance.now() - start >= 70);
});

test('hang_after_ready: connections are accepted but nothing is ever answered, /health included', async (t) => {
  const { server } = await launch(t, { failure: { mode: 'hang_after_ready', afterMs: 10 } }, 'hang.log');
  await waitFor(() => server.status === 'hung', { timeoutMs: 3000 });
  assert.equal(await probe(`${server.url}/health`, 200), 'TimeoutError');
  assert.equal(await probe(`${server.url}/v1/models`, 200), 'TimeoutError');
});

test('hang(): an in-flight stream stalls and new requests get no answer', async (t) => {
  const { server } = await launch(t, { engine: { tokenMs: 5 } }, 'hang-now.log');
  await server.whenReady(3000);
  const stream = openStream(
    `${server.url}/generate`,
    { text: 'x', stream: true, sampling_params: { max_new_tokens: 1000 } },
    2,
  );
  await stream.enough;
  server.hang();
  assert.equal(server.status, 'hung');
  assert.equal(await probe(`${server.url}/health`, 200), 'TimeoutError');
  const before = server.counters.generatedTokens;
  await probe(`${server.url}/get_load`, 100);
  assert.equal(server.counters.generatedTokens, before);
  await server.stop();
  assert.equal((await stream.done).complete, false);
});
