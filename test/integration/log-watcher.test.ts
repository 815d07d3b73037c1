/**
 * LogWatcher on real files in a temp dir: created late, appended in pieces (partial lines, `\r`
 * redraws, UTF-8 split between reads), restarted with `>` (truncated), rotated (renamed and
 * recreated), deleted and recreated.
 */
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rename, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { type LogResetReason, LogWatcher } from '../../src/fleet/logs/log-watcher.js';
import { once, waitFor } from '../helpers/wait.js';

const POLL_MS = 20;

interface Followed {
  watcher: LogWatcher;
  lines: string[];
  resets: LogResetReason[];
  /** Everything in order: lines, and resets as `<reset:reason>`. */
  events: string[];
}

async function tempLog(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetgate-log-watcher-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return join(dir, 'sglang_gpu0.log');
}

function follow(t: TestContext, path: string): Followed {
  const watcher = new LogWatcher(path, { pollMs: POLL_MS });
  const followed: Followed = { watcher, lines: [], resets: [], events: [] };
  watcher.on('lines', (lines) => {
    followed.lines.push(...lines);
    followed.events.push(...lines);
  });
  watcher.on('reset', (reason) => {
    followed.resets.push(reason);
    followed.events.push(`<reset:${reason}>`);
  });
  t.after(() => watcher.stop());
  watcher.start();
  return followed;
}

function linesEqual(followed: Followed, expected: string[]) {
  return waitFor(() => JSON.stringify(followed.lines) === JSON.stringify(expected), {
    timeoutMs: 5000,
    what: `lines ${JSON.stringify(expected)}, have ${JSON.stringify(followed.lines)}`,
  });
}

test('a file that exists at start is read from its beginning', async (t) => {
  const path = await tempLog(t);
  await writeFile(
    path,
    "[2025-03-14 06:56:30] server_args=ServerArgs(model_path='x')\n[2025-03-14 06:56:31 TP0] Init torch distributed begin.\n",
  );
  const followed = follow(t, path);
  await linesEqual(followed, [
    "[2025-03-14 06:56:30] server_args=ServerArgs(model_path='x')",
    '[2025-03-14 06:56:31 TP0] Init torch distributed begin.',
  ]);
  assert.deepEqual(followed.resets, ['created']);
});

test('a file created after the watcher started: nothing until it appears, then `created`', async (t) => {
  const path = await tempLog(t);
  const followed = follow(t, path);
  const errors: Error[] = [];
  followed.watcher.on('error', (error) => errors.push(error));
  const created = once<LogResetReason>(followed.watcher, 'reset', 5000);
  // Let a few polls find nothing, so the file really appears late.
  await new Promise((resolve) => setTimeout(resolve, POLL_MS * 5));
  await writeFile(path, 'Load weight begin. avail mem=137.34 GB\n');
  assert.equal(await created, 'created');
  await linesEqual(followed, ['Load weight begin. avail mem=137.34 GB']);
  assert.deepEqual(followed.events, ['<reset:created>', 'Load weight begin. avail mem=137.34 GB']);
  assert.deepEqual(errors, []);
});

test('appended slowly: partial lines wait for their end, `\\r` redraws are lines of their own', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, '');
  const followed = follow(t, path);
  await once(followed.watcher, 'reset', 5000);

  await appendFile(path, '[2025-03-14 06:56:42 TP0] Load weight be');
  await appendFile(path, 'gin. avail mem=137.34 GB\n');
  await linesEqual(followed, ['[2025-03-14 06:56:42 TP0] Load weight begin. avail mem=137.34 GB']);

  // tqdm writes `\r` + bar and flushes: the latest bar is complete before the next redraw.
  await appendFile(path, '\rLoading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]');
  await waitFor(() => followed.lines.length === 2, { timeoutMs: 5000, what: 'the first redraw' });
  await appendFile(path, '\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00it/s]');
  await appendFile(path, '\rLoading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.00it/s]\n');
  await appendFile(
    path,
    '[2025-03-14 06:56:45 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=20.45 GB\r\n',
  );
  await linesEqual(followed, [
    '[2025-03-14 06:56:42 TP0] Load weight begin. avail mem=137.34 GB',
    'Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]',
    'Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00it/s]',
    'Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.00it/s]',
    '[2025-03-14 06:56:45 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=20.45 GB',
  ]);
  assert.deepEqual(followed.resets, ['created']);
});

test('UTF-8 split between two reads is decoded whole', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, '');
  const followed = follow(t, path);
  const bar = Buffer.from('Capturing batches (bs=512 avail_mem=3.10 GB):  40%|████', 'utf8');
  // Cut inside the last `█` (3 bytes); the redraw before the cut is reported at once.
  await appendFile(path, Buffer.concat([Buffer.from('\r'), bar.subarray(0, bar.length - 1)]));
  await waitFor(() => followed.lines.length === 1, { timeoutMs: 5000, what: 'the cut redraw' });
  assert.equal(followed.lines[0], 'Capturing batches (bs=512 avail_mem=3.10 GB):  40%|███');
  await appendFile(path, Buffer.concat([bar.subarray(bar.length - 1), Buffer.from('      | 21/52\n')]));
  await waitFor(() => followed.lines.length === 2, { timeoutMs: 5000, what: 'the completed line' });
  assert.equal(followed.lines[1], 'Capturing batches (bs=512 avail_mem=3.10 GB):  40%|████      | 21/52');
  assert.ok(!followed.lines.join('').includes('\uFFFD'));
});

test('restart with `>`: truncated, then lines start again from the new run', async (t) => {
  const path = await tempLog(t);
  await writeFile(
    path,
    'old run line 1\nold run line 2\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n',
  );
  const followed = follow(t, path);
  await waitFor(() => followed.lines.length === 3, { timeoutMs: 5000, what: 'the old run' });

  await truncate(path, 0);
  await waitFor(() => followed.resets.includes('truncated'), { timeoutMs: 5000, what: 'truncated' });
  await appendFile(path, "new run: server_args=ServerArgs(model_path='x')\n");
  await waitFor(() => followed.lines.length === 4, { timeoutMs: 5000, what: 'the new run' });
  assert.deepEqual(followed.events.slice(-2), ['<reset:truncated>', "new run: server_args=ServerArgs(model_path='x')"]);
});

test('restart with `>` that writes past the old end before the next poll is still seen as truncated', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, 'old run: a short log\n');
  const followed = follow(t, path);
  await waitFor(() => followed.lines.length === 1, { timeoutMs: 5000, what: 'the old run' });

  // One write: the size never drops below what was read, so only the content shows the restart.
  await writeFile(path, 'NEW RUN: server_args=ServerArgs(model_path=x)\nLoad weight begin. avail mem=137.34 GB\n');
  await waitFor(() => followed.lines.length === 3, { timeoutMs: 5000, what: 'the new run' });
  assert.deepEqual(followed.events, [
    '<reset:created>',
    'old run: a short log',
    '<reset:truncated>',
    'NEW RUN: server_args=ServerArgs(model_path=x)',
    'Load weight begin. avail mem=137.34 GB',
  ]);
});

test('rotation: renamed and recreated is `replaced`; the old file is no longer followed', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, 'run 1 line\n');
  const followed = follow(t, path);
  await waitFor(() => followed.lines.length === 1, { timeoutMs: 5000, what: 'run 1' });

  await rename(path, `${path}.1`);
  await writeFile(path, 'run 2 line\n');
  await waitFor(() => followed.lines.length === 2, { timeoutMs: 5000, what: 'run 2' });
  await appendFile(`${path}.1`, 'written to the rotated file\n');
  await appendFile(path, 'run 2 second line\n');
  await waitFor(() => followed.lines.length === 3, { timeoutMs: 5000, what: 'run 2, second line' });
  assert.deepEqual(followed.events, [
    '<reset:created>',
    'run 1 line',
    '<reset:replaced>',
    'run 2 line',
    'run 2 second line',
  ]);
});

test('deleted, then created again: a reset, and the new file is read from its start', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, 'first\n');
  const followed = follow(t, path);
  await waitFor(() => followed.lines.length === 1, { timeoutMs: 5000, what: 'first' });
  await unlink(path);
  await new Promise((resolve) => setTimeout(resolve, POLL_MS * 3));
  await writeFile(path, 'second\n');
  await waitFor(() => followed.lines.length === 2, { timeoutMs: 5000, what: 'second' });
  assert.deepEqual(followed.lines, ['first', 'second']);
  // `replaced` when a poll saw the path empty; if the file system reused the inode and no poll
  // fell in the gap, the changed content shows it as `truncated`.
  assert.equal(followed.resets.length, 2);
  assert.ok(['replaced', 'truncated'].includes(followed.resets[1]), followed.resets[1]);
});

test('an idle file is not read again, and stop() ends polling', async (t) => {
  const path = await tempLog(t);
  await writeFile(path, 'only line\n');
  const followed = follow(t, path);
  await waitFor(() => followed.lines.length === 1, { timeoutMs: 5000, what: 'the line' });
  followed.watcher.stop();
  await appendFile(path, 'after stop\n');
  followed.watcher.start();
  // Restarting resumes at the same offset: nothing is repeated.
  await waitFor(() => followed.lines.length === 2, { timeoutMs: 5000, what: 'the appended line' });
  assert.deepEqual(followed.lines, ['only line', 'after stop']);
  assert.deepEqual(followed.resets, ['created']);
});
