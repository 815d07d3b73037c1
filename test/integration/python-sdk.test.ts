/**
 * fleetgate's users write their generation scripts in Python with the `openai` package: this runs
 * the real one (installed into .venv by scripts/ensure-python-sdk.sh) against `fleetgate serve` as a
 * process over simulated engines, each a process of its own, over TCP on 127.0.0.1. The scripts in
 * test/python/ make the calls, sync and async, and print one JSON line; this file starts the fleet
 * once and asserts on what they printed: the everyday calls, 500 requests in flight, a stream whose
 * engine is SIGKILLed, the Batch API end to end (cancel: an empty JSON body), and the errors as the
 * SDK's typed exceptions.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { outputText } from '../../src/sim/text-gen.js';
import { tempDir } from '../helpers/batch.js';
import { spawnCli } from '../helpers/cli.js';
import { REPO } from '../helpers/cli-entry.js';
import { freePort } from '../helpers/net.js';
import { type SimProcess, startSimProcess } from '../helpers/sim-process.js';
import { waitFor } from '../helpers/wait.js';

const PYTHON = join(REPO, '.venv/bin/python');
const SCRIPTS = join(REPO, 'test/python');
const KEY = 'sk-python-main';
const TIGHT_KEY = 'sk-python-tight';
const MODEL = 'fleet-model';
const TIGHT_MODEL = 'tight-model';
const RESUME_TOKENS = 300;
const run = promisify(execFile);

/** What stops when the file ends, last started first; for the helpers that take a test context. */
const cleanups: Array<() => unknown> = [];
const fileScope = { after: (fn: () => unknown) => cleanups.push(fn) };
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface Fleet {
  url: string;
  pid: number;
  sims: SimProcess[];
}

let fleet: Fleet;
let pythonSdk = '';

/** The venv with `openai`, installed when missing (npm test's pretest does it first; one file alone too). */
async function ensurePython(): Promise<string> {
  const script = join(REPO, 'scripts/ensure-python-sdk.sh');
  const { stdout } = await run(script, { cwd: REPO, timeout: 300_000 });
  assert.ok(existsSync(PYTHON), `${PYTHON} missing after ${script}`);
  return stdout.trim();
}

/** `fleetgate serve` as a process, in front of two engines of MODEL and one slow engine of TIGHT_MODEL. */
async function startFleet(): Promise<Fleet> {
  const sims = await Promise.all([
    startSimProcess(fileScope, 'gpu0', ['--model', MODEL, '--token-ms', '5']),
    startSimProcess(fileScope, 'gpu1', ['--model', MODEL, '--token-ms', '5']),
    startSimProcess(fileScope, 'tight0', ['--model', TIGHT_MODEL, '--token-ms', '20', '--max-running', '1']),
  ]);
  const dir = tempDir(fileScope, 'fleetgate-python-');
  const port = await freePort();
  const config = {
    listen: `127.0.0.1:${port}`,
    backends: sims.map((sim) => ({ url: sim.url, name: sim.name })),
    auth: { api_keys: [KEY, TIGHT_KEY] },
    default_model: MODEL,
    // One request at a time on the tight engine, one waiting in its class: a full queue, at once.
    queue: {
      classes: ['interactive', { name: 'tight', max_waiting: 1, api_keys: [TIGHT_KEY] }, 'batch'],
      default_class: 'batch',
    },
    // Retry-After: 1 (health.starting_interval); a probe every 100 ms after the engine's kill.
    health: { starting_interval: '1s', interval: '1s', fall: 1 },
    batch: { dir: join(dir, 'batches') },
    log: { level: 'warn', access: false },
  };
  const file = join(dir, 'fleetgate.yaml');
  writeFileSync(file, JSON.stringify(config));
  const serve = spawnCli(['serve', '--config', file]);
  const pid = serve.child.pid;
  assert.ok(pid !== undefined, 'fleetgate started');
  fileScope.after(async () => {
    if (serve.child.exitCode === null) serve.child.kill('SIGTERM');
    await serve.closed;
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      if (serve.child.exitCode !== null) throw new Error(`fleetgate exited: ${serve.output()}`);
      const res = await fetch(`${url}/fleet/status`);
      const status = (await res.json()) as { backends: Array<{ state: string }> };
      // Its start-up warm-up on, as shipped: /readyz says when a script may start.
      const ready = (await fetch(`${url}/readyz`)).status === 200;
      return ready && status.backends.filter((b) => b.state === 'ready').length === sims.length;
    },
    { what: 'fleetgate and its three engines ready', timeoutMs: 60_000, intervalMs: 100 },
  );
  return { url, pid, sims };
}

/** Runs test/python/`script` with the venv's python; its last stdout line, parsed. */
async function python<T>(script: string, env: Record<string, string> = {}, timeoutMs = 90_000): Promise<T> {
  const child = spawn(PYTHON, [join(SCRIPTS, script)], {
    cwd: SCRIPTS,
    env: {
      ...process.env,
      FLEETGATE_URL: fleet.url,
      FLEETGATE_API_KEY: KEY,
      FLEETGATE_MODEL: MODEL,
      PYTHONDONTWRITEBYTECODE: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  clearTimeout(timer);
  assert.equal(code, 0, `${script} exited ${code}:\n${stderr}${stdout}`);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(last) as T;
}

before(async () => {
  const [version, started] = await Promise.all([ensurePython(), startFleet()]);
  pythonSdk = version;
  fleet = started;
});

interface Refusal {
  type: string;
  status: number;
  message: string;
  body_message: string | null;
  retry_after: string | null;
}

test('the calls of a generation script, sync and async: models, chat, streamed chat with usage, completions, /generate', async (t) => {
  t.diagnostic(pythonSdk);
  interface Basics {
    models: string[];
    chat: { content: string; finish_reason: string; completion_tokens: number };
    stream: {
      text: string;
      finish_reasons: string[];
      usage: { completion_tokens: number } | null;
      chunks: number;
    };
    completion: { text: string; finish_reason: string; completion_tokens: number };
    generate: { status: number; text: string; meta: { completion_tokens?: number } };
  }
  const result = await python<{ sync: Basics; async: Basics }>('basics.py');
  for (const [mode, got] of Object.entries(result)) {
    assert.deepEqual(got.models, [MODEL, TIGHT_MODEL], `${mode}: models.list`);
    assert.deepEqual(got.chat, { content: outputText(8), finish_reason: 'length', completion_tokens: 8 }, mode);
    assert.deepEqual(got.stream.finish_reasons, ['length'], `${mode}: exactly one finish_reason`);
    assert.equal(got.stream.text, outputText(12), `${mode}: the streamed text`);
    assert.equal(got.stream.usage?.completion_tokens, 12, `${mode}: usage in the stream`);
    assert.deepEqual(got.completion, { text: outputText(7), finish_reason: 'length', completion_tokens: 7 }, mode);
    assert.equal(got.generate.status, 200, `${mode}: /generate`);
    assert.equal(got.generate.text, outputText(6), `${mode}: /generate text`);
    assert.equal(got.generate.meta.completion_tokens, 6, `${mode}: /generate meta_info`);
  }
});

test('AsyncOpenAI, 500 requests in flight, half streamed: every one answered, one finish each', async (t) => {
  const result = await python<{
    requests: number;
    answered: number;
    one_finish_each: number;
    distinct_texts: number;
    text: string;
    errors: string[];
    seconds: number;
    fleetgate: { rss_mb: number; peak_rss_mb: number };
  }>('async_load.py', { FLEETGATE_PID: String(fleet.pid) });
  assert.deepEqual(result.errors, [], 'no APIError');
  assert.equal(result.answered, 500);
  assert.equal(result.one_finish_each, 500, 'each answer has exactly one finish_reason, length');
  assert.deepEqual([result.distinct_texts, result.text], [1, outputText(16)], 'each the whole answer');
  t.diagnostic(
    `500 requests (250 streamed) in ${result.seconds} s; fleetgate (under tsx) RSS ${result.fleetgate.rss_mb} MB, peak ${result.fleetgate.peak_rss_mb} MB`,
  );
});

test('the Batch API end to end with the Python SDK: upload, create, list, cancel mid-job, content, delete', async (t) => {
  interface BatchResult {
    sync: {
      file: { object: string; purpose: string; bytes: number };
      completed: {
        created_status: string;
        status: string;
        metadata: Record<string, string>;
        counts: { total: number; completed: number; failed: number };
        output_ids: string[];
        output_statuses: number[];
        error_ids: string[];
        error_statuses: Array<number | null>;
      };
      cancelled: {
        cancel_answer: string;
        statuses: string[];
        counts: { total: number; completed: number; failed: number };
        output_lines: number;
        output_ok: boolean;
        cancelled_at: boolean;
      };
      list: {
        first: string[];
        first_has_more: boolean;
        second: string[];
        created_at: number[];
        all: string[];
        jobs: { completed: string; cancelled: string };
      };
      delete: {
        answers: Array<{ id: string; object: string; deleted: boolean }>;
        retrieve_after: { status: number; message: string } | null;
      };
    };
    async: { id: string; statuses: string[]; listed: string[]; deleted: boolean };
  }
  const { sync, async: asyncRun } = await python<BatchResult>('batch_api.py');
  assert.deepEqual(sync.file, { object: 'file', purpose: 'batch', bytes: sync.file.bytes });
  assert.ok(sync.file.bytes > 0);

  const done = sync.completed;
  assert.ok(['validating', 'in_progress'].includes(done.created_status), done.created_status);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.metadata, { job: 'python-sdk' });
  assert.deepEqual(done.counts, { total: 20, completed: 18, failed: 2 });
  assert.equal(done.output_ids.length, 18);
  assert.deepEqual(done.output_statuses, [200]);
  assert.deepEqual(done.error_ids, ['r11', 'r3'], 'the two lines naming no served model');
  assert.deepEqual(done.error_statuses, [404]);

  const cancelled = sync.cancelled;
  t.diagnostic(`cancel mid-job: ${cancelled.statuses.join(' -> ')}, ${JSON.stringify(cancelled.counts)}`);
  assert.equal(cancelled.cancel_answer, 'cancelling', 'the cancel answers cancelling');
  assert.deepEqual(cancelled.statuses.slice(-2), ['cancelling', 'cancelled']);
  assert.ok(cancelled.cancelled_at);
  assert.ok(cancelled.counts.completed > 0 && cancelled.counts.completed < 4000, 'stopped mid-job');
  assert.equal(cancelled.output_lines, cancelled.counts.completed, 'the output holds what finished');
  assert.ok(cancelled.output_ok);

  // Newest first by created_at (seconds: two jobs of one second come in either order), one per page.
  const { list } = sync;
  assert.equal(list.first.length, 1);
  assert.equal(list.first_has_more, true);
  assert.equal(list.second.length, 1);
  assert.deepEqual(
    new Set([...list.first, ...list.second]),
    new Set([list.jobs.completed, list.jobs.cancelled]),
    'after= the first page: the other job',
  );
  assert.ok(list.created_at[0] >= list.created_at[1], `newest first: ${list.created_at.join(', ')}`);
  assert.deepEqual(list.all, [...list.first, ...list.second], 'auto-pagination with limit=1');

  assert.deepEqual(
    sync.delete.answers.map((a) => [a.object, a.deleted]),
    [
      ['file', true],
      ['file', true],
      ['file', true],
    ],
  );
  assert.equal(sync.delete.retrieve_after?.status, 404, 'a deleted file is gone');

  assert.deepEqual(asyncRun.statuses.slice(-1), ['cancelled'], 'AsyncOpenAI: batches.cancel');
  assert.ok(asyncRun.statuses.includes('cancelling') || asyncRun.statuses[0] === 'cancelled', asyncRun.statuses.join());
  assert.equal(asyncRun.listed.length, 3, 'AsyncOpenAI: batches.list pages through all three jobs');
  assert.ok(asyncRun.listed.includes(asyncRun.id));
  assert.equal(asyncRun.deleted, true);
});

test("errors as the SDK's typed exceptions with fleetgate's message; max_retries=2 waits out a 429", async (t) => {
  interface Errors {
    sync: Record<'bad_body' | 'missing_file' | 'missing_batch_input' | 'wrong_key' | 'wrong_key_models', Refusal>;
    async: Record<'bad_body' | 'missing_file' | 'wrong_key', Refusal> & {
      rate_limit: {
        rounds: number;
        fills: number;
        fills_answered: number;
        fill_errors: string[];
        refused: Refusal;
        retried: { retries_taken: number; finish: string; seconds: number };
      };
    };
  }
  const result = await python<Errors>('errors.py', {
    FLEETGATE_TIGHT_KEY: TIGHT_KEY,
    FLEETGATE_TIGHT_MODEL: TIGHT_MODEL,
  });
  for (const [mode, got] of Object.entries(result) as Array<[string, Errors['sync'] & Errors['async']]>) {
    assert.equal(got.bad_body.type, 'BadRequestError', mode);
    assert.equal(got.bad_body.status, 400);
    assert.match(got.bad_body.body_message ?? '', /^endpoint must be one of /, `${mode}: fleetgate's message`);
    assert.equal(got.missing_file.type, 'NotFoundError', mode);
    assert.match(got.missing_file.body_message ?? '', /^No file found with id 'file-0+'$/);
    assert.equal(got.wrong_key.type, 'AuthenticationError', mode);
    assert.equal(got.wrong_key.status, 401);
    assert.match(got.wrong_key.body_message ?? '', /API key/i, `${mode}: ${got.wrong_key.message}`);
  }
  assert.equal(result.sync.missing_batch_input.type, 'NotFoundError');
  assert.equal(result.sync.wrong_key_models.type, 'AuthenticationError');

  const limit = result.async.rate_limit;
  t.diagnostic(`429 after ${limit.fills} requests (${limit.rounds} round): ${JSON.stringify(limit.refused)}`);
  t.diagnostic(`max_retries=2: ${JSON.stringify(limit.retried)}`);
  assert.equal(limit.refused.type, 'RateLimitError');
  assert.equal(limit.refused.status, 429);
  assert.equal(limit.refused.retry_after, '1');
  assert.match(limit.refused.body_message ?? '', /already waiting \(its max_waiting\)$/, "fleetgate's message");
  assert.ok(limit.retried.retries_taken >= 1, 'the 429 was retried');
  assert.equal(limit.retried.finish, 'length', 'and answered once capacity freed');
  assert.deepEqual(limit.fill_errors, []);
  assert.equal(limit.fills_answered, limit.fills);
});

// Last: it kills one of MODEL's two engines.
test("a streamed chat whose engine is SIGKILLed mid-stream: the SDK's iterator yields one whole answer", async (t) => {
  const pids = Object.fromEntries(fleet.sims.map((sim) => [sim.name, sim.child.pid]));
  const result = await python<{
    killed: { backend: string; text_before: number } | null;
    text: string;
    finishes: string[];
    usage: number | null;
    chunks: number;
    error: string | null;
  }>('resume.py', { FLEETGATE_SIM_PIDS: JSON.stringify(pids), FLEETGATE_RESUME_TOKENS: String(RESUME_TOKENS) });
  t.diagnostic(`killed ${JSON.stringify(result.killed)}; ${result.chunks} chunks`);
  assert.equal(result.error, null, 'no exception');
  assert.ok(result.killed !== null && ['gpu0', 'gpu1'].includes(result.killed.backend), 'an engine was killed');
  const killed = fleet.sims.find((sim) => sim.name === result.killed?.backend);
  assert.ok(killed?.child.signalCode === 'SIGKILL' || killed?.child.exitCode === null, 'by SIGKILL');
  assert.deepEqual(result.finishes, ['length'], 'one finish_reason');
  assert.equal(result.text, outputText(RESUME_TOKENS), 'the whole answer, seamless');
  assert.equal(result.usage, RESUME_TOKENS);
});
