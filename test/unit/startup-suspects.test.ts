/**
 * Start-up failure suspects in the pure lifecycle (injected clock): a traceback's final exception
 * before ready fails the backend on the process's exit, on its port going down, or after
 * `failure_quiet` without progress; progress clears it; after ready the existing rules stand; 0 = off.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type BackendEvent, BackendLifecycle, type ProbeResult } from '../../src/fleet/backend-lifecycle.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';

const REFUSED: ProbeResult = { ok: false, reachable: false, reason: 'connection refused' };
const WARMING: ProbeResult = { ok: false, reachable: true, reason: '/health 503 (warming up)', phase: 'warming_up' };
const OK: ProbeResult = { ok: true, reachable: true, reason: null };
const QUIET = 5_000;
const OOM =
  "ValueError: To serve at least one request with the models's max seq len (131072), (4.54 GiB KV cache is needed";

function machine(failureQuiet = QUIET) {
  let clock = 1_000_000;
  const lifecycle = new BackendLifecycle({
    rise: 1,
    fall: 3,
    stallAfter: 600_000,
    hasLog: true,
    failureQuiet,
    now: () => clock,
  });
  const feed = (event: BackendEvent) => lifecycle.apply(event);
  return {
    lifecycle,
    feed,
    advance: (ms: number) => {
      clock += ms;
      return feed({ type: 'tick' });
    },
  };
}

const start: BackendEvent = { type: 'log', event: { type: 'start' } };
const loading: BackendEvent = {
  type: 'log',
  event: { type: 'phase', phase: 'loading_weights', progress: { done: 1, total: 4 }, etaSeconds: null },
};
const ready: BackendEvent = { type: 'log', event: { type: 'ready' } };
const suspect = (reason: string): BackendEvent => ({ type: 'log', event: { type: 'suspect', reason } });

describe('start-up failure suspects', () => {
  test('the process exits after a suspect: failed at once with the exception line, cause exit', () => {
    const m = machine();
    m.feed(start);
    m.feed(suspect(OOM));
    assert.equal(m.lifecycle.state, 'starting');
    const transition = m.feed({ type: 'process_exit', detail: 'exited with code 1' });
    assert.equal(transition?.to, 'failed');
    assert.equal(transition?.reason, OOM);
    assert.equal(transition?.cause, 'exit');
  });

  test('the exit read before the traceback (the log is polled): the suspect fails it when it arrives', () => {
    const m = machine();
    m.feed(start);
    m.feed({ type: 'process_exit', detail: 'exited with code 1' });
    assert.notEqual(m.lifecycle.state, 'failed');
    assert.equal(m.feed(suspect(OOM))?.to, 'failed');
  });

  test('no progress for failure_quiet: failed (cause quiet); one ms before, still starting', () => {
    const m = machine();
    m.feed(start);
    m.feed(suspect(OOM));
    assert.equal(m.advance(QUIET - 1), null);
    assert.equal(m.lifecycle.state, 'starting');
    const transition = m.advance(1);
    assert.equal(transition?.to, 'failed');
    assert.equal(transition?.cause, 'quiet');
    assert.equal(m.lifecycle.snapshot.reason, OOM);
  });

  test('its port goes from answering to refused: failed (cause port_down)', () => {
    const m = machine();
    m.feed(start);
    m.feed({ type: 'probe', result: WARMING });
    m.feed(suspect(OOM));
    const transition = m.feed({ type: 'probe', result: REFUSED });
    assert.equal(transition?.to, 'failed');
    assert.equal(transition?.cause, 'port_down');
  });

  test('a port that was never open says nothing (SGLang keeps it closed while loading)', () => {
    const m = machine();
    m.feed(start);
    m.feed(suspect(OOM));
    m.feed({ type: 'probe', result: REFUSED });
    assert.equal(m.lifecycle.state, 'starting');
  });

  test('progress after the suspect clears it: a recovered traceback is not a failure', () => {
    const m = machine();
    m.feed(start);
    m.feed(suspect(OOM));
    m.feed(loading);
    m.advance(QUIET * 10);
    m.feed({ type: 'process_exit', detail: 'exited with code 0' });
    assert.equal(m.lifecycle.state, 'starting');
  });

  test('failed on a suspect sticks until a fresh start', () => {
    const m = machine();
    m.feed(start);
    m.feed(suspect(OOM));
    m.advance(QUIET);
    m.feed(loading);
    assert.equal(m.lifecycle.state, 'failed');
    m.feed(start);
    assert.equal(m.lifecycle.state, 'starting');
  });

  test('after ready a suspect is ignored: the existing rules stand', () => {
    const m = machine();
    m.feed(start);
    m.feed(ready);
    m.feed({ type: 'probe', result: OK });
    assert.equal(m.lifecycle.state, 'ready');
    m.feed(suspect("ValueError: This model's maximum context length is 8192 tokens."));
    m.advance(QUIET * 2);
    assert.equal(m.lifecycle.state, 'ready');
  });

  test('failure_quiet 0 turns suspects off: an exit after a traceback is not failed', () => {
    const m = machine(0);
    m.feed(start);
    m.feed(suspect(OOM));
    m.feed({ type: 'process_exit', detail: 'exited with code 1' });
    m.advance(60_000);
    assert.notEqual(m.lifecycle.state, 'failed');
  });
});

describe('what the parsers take for a suspect', () => {
  const suspects = (kind: 'sglang' | 'vllm', lines: string[]) => {
    const parser = createLogParser(kind, []);
    return lines.flatMap((line) => parser.push(line)).filter((event) => event.type === 'suspect');
  };

  test('a grep line that is a warning is not one; the same words in an error record are', () => {
    assert.deepEqual(
      suspects('vllm', ['WARNING 05-01 10:00:00 [config.py:1] ValueError raised by a plugin, ignored']),
      [],
    );
    assert.deepEqual(suspects('sglang', ['/x/y.py:3: UserWarning: a RuntimeError in the allocator is deprecated']), []);
    assert.equal(suspects('sglang', ['[2025-03-14 06:56:42 TP0] ValueError: unsupported rope_scaling']).length, 1);
  });

  test('a frame quoting `raise ValueError(` is part of its traceback, not a grep line of its own', () => {
    const events = suspects('vllm', [
      'Traceback (most recent call last):',
      '  File "/v/worker.py", line 544, in raise_if_cache_size_invalid',
      '    raise ValueError(',
      "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens",
    ]);
    assert.deepEqual(
      events.map((event) => event.type === 'suspect' && event.reason),
      ["ValueError: The model's max seq len (131072) is larger than the maximum number of tokens"],
    );
  });

  test('a traceback Python went on past is none: resource tracker, `Exception ignored in`', () => {
    const tracker = [
      'Traceback (most recent call last):',
      '  File "/usr/lib/python3.10/multiprocessing/resource_tracker.py", line 209, in main',
      '    cache[rtype].remove(name)',
      "KeyError: '/psm_10b3d52e'",
    ];
    assert.deepEqual(suspects('vllm', tracker), []);
    assert.deepEqual(suspects('sglang', tracker), []);
    const ignored = [
      'Exception ignored in: <function Communicator.__del__ at 0x7f>',
      'Traceback (most recent call last):',
      '  File "/v/comm.py", line 80, in __del__',
      'RuntimeError: NCCL communicator already destroyed',
    ];
    assert.deepEqual(suspects('vllm', ignored), []);
    // Without its head line the same traceback is an uncaught RuntimeError: fatal for vLLM.
    const vllm = createLogParser('vllm', []);
    assert.ok(
      ignored
        .slice(1)
        .flatMap((line) => vllm.push(line))
        .some((event) => event.type === 'fatal'),
    );
    const excused = createLogParser('vllm', []);
    assert.ok(!ignored.flatMap((line) => excused.push(line)).some((event) => event.type === 'fatal'));
  });

  test('after the ready line, or once a fatal line was reported, there are none', () => {
    assert.deepEqual(suspects('vllm', ['INFO:     Application startup complete.', 'ValueError: one bad request']), []);
    assert.deepEqual(
      suspects('sglang', [
        '[2025-03-14 06:56:42 TP0] Not enough memory. Please try to increase --mem-fraction-static.',
        'ValueError: later',
      ]),
      [],
    );
  });
});
