/**
 * The one traceback reader: prefixes stripped the same way for bare, logged and process-tagged
 * lines; tracebacks followed per process, chained or not; the exception line that ends each.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import {
  exceptionOf,
  splitLogLine,
  type TracebackException,
  TracebackReader,
} from '../../src/fleet/logs/traceback-reader.js';
import { fixtureText, loadLogFixtures } from '../helpers/log-fixtures.js';

function read(lines: readonly string[]): TracebackException[] {
  const reader = new TracebackReader();
  return lines.flatMap((line) => {
    const thrown = reader.push(splitLogLine(line));
    return thrown === null ? [] : [thrown];
  });
}

function fixtureLines(file: string): string[] {
  const fixture = loadLogFixtures().find((f) => f.file === file);
  assert.ok(fixture, file);
  return new LineSplitter().push(fixtureText(fixture));
}

describe('splitLogLine', () => {
  test('V1 process tags, nested tags, the logger header, torch rank prefix, ANSI, a \\r redraw', () => {
    assert.deepEqual(
      splitLogLine('(VllmWorker rank=3 pid=9) ERROR 11-02 10:41:07 [multiproc_executor.py:527] RuntimeError: x'),
      {
        tag: 'VllmWorker rank=3 pid=9',
        level: 'ERROR',
        isRecord: true,
        message: 'RuntimeError: x',
      },
    );
    assert.equal(
      splitLogLine('(vLLMHttpServer pid=6840) (Worker pid=7181) ERROR 06-09 17:58:55 [m.py:852] Boom').tag,
      'Worker pid=7181',
    );
    assert.equal(
      splitLogLine('[rank0]: RuntimeError: Gloo connectFullMesh failed').message,
      'RuntimeError: Gloo connectFullMesh failed',
    );
    assert.equal(splitLogLine('[2025-03-14 06:56:42 TP1] Load weight begin.').message, 'Load weight begin.');
    assert.equal(
      splitLogLine('\x1b[1;31mERROR\x1b[0m 02-07 11:28:26 engine.py:389] ValueError: v').message,
      'ValueError: v',
    );
    assert.equal(splitLogLine('Loading 0/4\rLoading 1/4').message, 'Loading 1/4');
    assert.equal(
      splitLogLine('(EngineCore_DP0 pid=4711)   File "/a.py", line 3, in f').message,
      '  File "/a.py", line 3, in f',
    );
  });
});

describe('exceptionOf', () => {
  test('exception lines, and what only looks like one', () => {
    assert.deepEqual(exceptionOf('torch.OutOfMemoryError: CUDA out of memory.'), {
      type: 'torch.OutOfMemoryError',
      message: 'CUDA out of memory.',
    });
    assert.deepEqual(exceptionOf('AssertionError'), { type: 'AssertionError', message: '' });
    assert.equal(exceptionOf('self.comm: ncclComm_t = self.nccl.ncclCommInitRank('), null);
    assert.equal(exceptionOf('  warnings.warn('), null);
    assert.equal(exceptionOf('ess'), null);
  });
});

describe('TracebackReader', () => {
  test('a chained traceback: the later link is marked chained, so it replaces the first', () => {
    const tag = '(EngineCore_DP0 pid=4711) ';
    const thrown = read(
      [
        'Traceback (most recent call last):',
        '  File "/v/core.py", line 1, in run',
        'subprocess.CalledProcessError: returned non-zero exit status 1.',
        '',
        'The above exception was the direct cause of the following exception:',
        '',
        'Traceback (most recent call last):',
        '  File "/v/registry.py", line 2, in inspect',
        "ValueError: Model architectures ['FooForCausalLM'] are not supported for now.",
      ].map((line) => tag + line),
    );
    assert.deepEqual(
      thrown.map((t) => [t.type, t.chained, t.tag]),
      [
        ['subprocess.CalledProcessError', false, 'EngineCore_DP0 pid=4711'],
        ['ValueError', true, 'EngineCore_DP0 pid=4711'],
      ],
    );
  });

  test('a new traceback without a chain header is not a later link', () => {
    const thrown = read([
      'Traceback (most recent call last):',
      '  File "/a.py", line 1',
      'KeyError: 1',
      'Traceback (most recent call last):',
      '  File "/b.py", line 2',
      'OSError: 2',
    ]);
    assert.deepEqual(
      thrown.map((t) => t.chained),
      [false, false],
    );
  });

  test('two processes interleaving their tracebacks: each ends with its own exception', () => {
    const thrown = read([
      '(A pid=1) Traceback (most recent call last):',
      '(B pid=2) Traceback (most recent call last):',
      '(A pid=1)   File "/a.py", line 1, in f',
      '(B pid=2)   File "/b.py", line 1, in g',
      '(B pid=2) OSError: [Errno 98] Address already in use',
      '(A pid=1) RuntimeError: NCCL error',
    ]);
    assert.deepEqual(
      thrown.map((t) => `${t.tag}: ${t.text}`),
      ['B pid=2: OSError: [Errno 98] Address already in use', 'A pid=1: RuntimeError: NCCL error'],
    );
  });

  test('real logs: unindented frames (sglang#8974), torch rank prefix (vllm#6775), logged V0 (vllm#12865)', () => {
    assert.deepEqual(
      read(fixtureLines('sglang-8974-nccl-unindented-traceback.log')).map((t) => t.type),
      ['RuntimeError'],
    );
    assert.deepEqual(
      read(fixtureLines('vllm-6775-gloo-rank0-torch-distributed.log')).map((t) => t.type),
      ['RuntimeError'],
    );
    assert.match(read(fixtureLines('vllm-12865-v0-max-seq-len-valueerror.log'))[0].message, /max seq len \(131072\)/);
  });

  test("handled: the resource tracker's own process (vllm#5740) and the unraisable hook; nothing else", () => {
    const tracker = read(fixtureLines('vllm-5740-resource-tracker-keyerror.log'));
    assert.deepEqual(
      tracker.map((t) => `${t.type} ${t.handled}`),
      Array(6).fill('KeyError true'),
    );
    const thrown = read([
      'Exception ignored in: <function Communicator.__del__ at 0x7f>',
      'Traceback (most recent call last):',
      '  File "/v/comm.py", line 80, in __del__',
      'RuntimeError: NCCL communicator already destroyed',
      'Traceback (most recent call last):',
      '  File "/v/api_server.py", line 9, in <module>',
      '  File "/usr/lib/python3.10/multiprocessing/resource_tracker.py", line 74, in ensure_running',
      'OSError: [Errno 24] Too many open files',
      'Exception ignored in: <function X.__del__>',
      'INFO 06-21 19:23:24 model_runner.py:1] a line between',
      'Traceback (most recent call last):',
      '  File "/v/b.py", line 2, in f',
      'ValueError: the next traceback is not excused',
    ]);
    assert.deepEqual(
      thrown.map((t) => `${t.type} ${t.handled}`),
      ['RuntimeError true', 'OSError false', 'ValueError false'],
      "the program's own call into resource_tracker.py is not the tracker process",
    );
  });
});
