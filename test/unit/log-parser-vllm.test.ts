/**
 * The vLLM log parser. Messages are verbatim from docs/sglang-vllm-behaviour.md §6
 * where it quotes them; the record headers (`(EngineCore_0 pid=...) INFO 08-05 10:00:40
 * [file.py:N] `) are vLLM's logger format, in the three shapes real logs show.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import type { LogEvent, LogParser } from '../../src/fleet/logs/log-events.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';
import { createVllmLogParser, vllmMessage } from '../../src/fleet/logs/vllm-log-parser.js';

const api = (message: string) => `(APIServer pid=12345) INFO 08-05 10:00:02 [api_server.py:1805] ${message}`;
const core = (message: string) => `(EngineCore_0 pid=12400) INFO 08-05 10:00:40 [gpu_model_runner.py:2007] ${message}`;
const coreError = (message: string) => `(EngineCore_0 pid=12400) ERROR 08-05 10:00:41 [core.py:700] ${message}`;

function pushAll(parser: LogParser, lines: string[]): LogEvent[] {
  return lines.flatMap((line) => parser.push(line));
}

function phases(events: LogEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'phase' ? [event.phase] : []));
}

function fatalReasons(events: LogEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'fatal' || event.type === 'fatal_reason' ? [event.reason] : []));
}

describe('vLLM start-up', () => {
  test('a full V1 start: one start, each phase in turn, ready on `Application startup complete.`', () => {
    const parser = createVllmLogParser();
    const splitter = new LineSplitter();
    const lines = [
      api('vLLM API server version 0.10.1'),
      api("non-default args: {'model': 'Qwen/Qwen3-8B'}"),
      core("Initializing a V1 LLM engine (v0.10.1) with config: model='Qwen/Qwen3-8B'"),
      core('Starting to load model Qwen/Qwen3-8B...'),
      ...splitter.push(
        '\rLoading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:  20% Completed | 1/5 [00:00<00:02,  1.51it/s]\n',
      ),
      core('Loading weights took 3.01 seconds'),
      core('Model loading took 15.27 GiB and 3.74 seconds'),
      core('Available KV cache memory: 51.59 GiB'),
      core('GPU KV cache size: 375,632 tokens'),
      ...splitter.push('\rCapturing CUDA graphs (decode, FULL): 100%|██████████| 67/67 [00:02<00:00, 25.10it/s]\n'),
      core('Graph capturing finished in 38 secs, took 1.64 GiB'),
      core('init engine (profile, create kv cache, warmup model) took 147.31 s'),
      api('Starting vLLM server on http://0.0.0.0:8000'),
      '(APIServer pid=12345) INFO:     Started server process [12345]',
      '(APIServer pid=12345) INFO:     Waiting for application startup.',
      '(APIServer pid=12345) INFO:     Application startup complete.',
    ];
    const events = pushAll(parser, lines);
    assert.deepEqual(events[0], { type: 'start' });
    assert.equal(events.filter((event) => event.type === 'start').length, 1);
    assert.deepEqual(
      [...new Set(phases(events))],
      ['launching', 'loading_weights', 'allocating_kv_cache', 'capturing_cuda_graphs', 'starting_http'],
    );
    const bars = events.filter((event) => event.type === 'phase' && event.progress !== null);
    assert.deepEqual(bars, [
      { type: 'phase', phase: 'loading_weights', progress: { done: 0, total: 5 }, etaSeconds: null },
      { type: 'phase', phase: 'loading_weights', progress: { done: 1, total: 5 }, etaSeconds: 2 },
      { type: 'phase', phase: 'capturing_cuda_graphs', progress: { done: 67, total: 67 }, etaSeconds: 0 },
    ]);
    assert.deepEqual(events.at(-1), { type: 'ready' });
  });

  test('the older `Starting vLLM API server on` and `Capturing CUDA graph shapes` spellings', () => {
    const parser = createVllmLogParser();
    parser.push(api('vLLM API server version 0.6.3'));
    assert.deepEqual(
      phases(parser.push('Capturing CUDA graph shapes:  50%|█████     | 33/67 [00:02<00:02, 14.44it/s]')),
      ['capturing_cuda_graphs'],
    );
    assert.deepEqual(phases(parser.push(api('Starting vLLM API server on http://0.0.0.0:8000'))), ['starting_http']);
  });

  test('V0 (0.4-0.6) progress lines: weights loaded, KV blocks sized, capture announced', () => {
    const parser = createVllmLogParser();
    parser.push('INFO 06-21 19:23:14 api_server.py:177] vLLM API server version 0.5.0.post1');
    const v0 = [
      'INFO 11-05 04:09:49 model_runner.py:1025] Loading model weights took 10.0714 GB',
      'INFO 06-21 19:23:40 distributed_gpu_executor.py:56] # GPU blocks: 20356, # CPU blocks: 6553',
      'INFO 06-21 19:23:56 model_runner.py:889] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.',
    ];
    assert.deepEqual(phases(pushAll(parser, v0)), ['loading_weights', 'allocating_kv_cache', 'capturing_cuda_graphs']);
    assert.deepEqual(
      phases(
        createVllmLogParser().push('INFO 10-01 12:00:00 executor_base.py:110] # cuda blocks: 5000, # CPU blocks: 2048'),
      ),
      ['allocating_kv_cache'],
      'vLLM 0.6 names the device',
    );
  });

  test('record headers: dated, pre-bracket (`file.py:N]`) and 2026 undated', () => {
    assert.deepEqual(vllmMessage('INFO 09-01 10:22:14 gpu_worker.py:284] Available KV cache memory: 9.42 GiB'), {
      message: 'Available KV cache memory: 9.42 GiB',
      isRecord: true,
    });
    assert.deepEqual(
      vllmMessage('(EngineCore pid=1501) INFO [gpu_worker.py:480] Available KV cache memory: 3.24 GiB'),
      {
        message: 'Available KV cache memory: 3.24 GiB',
        isRecord: true,
      },
    );
    assert.deepEqual(vllmMessage(coreError('  File "/vllm/v1/engine/core.py", line 623, in run_engine_core')), {
      message: '  File "/vllm/v1/engine/core.py", line 623, in run_engine_core',
      isRecord: true,
    });
    assert.deepEqual(vllmMessage('(APIServer pid=4555) INFO:     Application startup complete.'), {
      message: 'Application startup complete.',
      isRecord: false,
    });
  });

  test('a new `vLLM API server version` line is a new start; per-engine lines are not', () => {
    const parser = createVllmLogParser();
    parser.push(api('vLLM API server version 0.10.1'));
    parser.push(core('Loading weights took 3.01 seconds'));
    assert.deepEqual(parser.push(core("Initializing a V1 LLM engine (v0.10.1) with config: model='x'")), []);
    assert.deepEqual(parser.push(api('vLLM API server version 0.10.1')), [
      { type: 'start' },
      { type: 'phase', phase: 'launching', progress: null, etaSeconds: null },
    ]);
  });

  test('without the version line, the first early line still marks the start', () => {
    const parser = createVllmLogParser();
    assert.deepEqual(parser.push(api("non-default args: {'model': 'x'}"))[0], { type: 'start' });
  });
});

describe('vLLM fatal lines', () => {
  const freeMemory =
    'ValueError: Free memory on device cuda:0 (84.11/287.98 GiB) on startup is less than desired GPU memory utilization (0.95, 273.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.';

  test('startup OOM refusal (docs/sglang-vllm-behaviour.md §6), cut to about 200 characters', () => {
    const [reason] = fatalReasons(createVllmLogParser().push(freeMemory));
    assert.ok(
      reason.startsWith('ValueError: Free memory on device cuda:0 (84.11/287.98 GiB) on startup is less than desired'),
    );
    assert.ok(reason.length <= 200);
  });

  test('V0 `Engine background task failed` is fatal at once, even when its traceback never ends (vllm#5443)', () => {
    const parser = createVllmLogParser();
    const v0 = (message: string) => `ERROR 06-13 02:36:52 async_llm_engine.py:52] ${message}`;
    assert.deepEqual(
      fatalReasons(pushAll(parser, [v0('Engine background task failed'), v0('Traceback (most recent call last):')])),
      ['Engine background task failed'],
    );
  });

  test('`EngineCore failed to start.` is fatal at once, refined by the logged traceback', () => {
    const parser = createVllmLogParser();
    parser.push(api('vLLM API server version 0.10.1'));
    assert.deepEqual(parser.push(coreError('EngineCore failed to start.')), [
      { type: 'fatal', reason: 'EngineCore failed to start' },
    ]);
    const events = pushAll(parser, [
      coreError('Traceback (most recent call last):'),
      coreError('  File "/vllm-workspace/vllm/vllm/v1/engine/core.py", line 623, in run_engine_core'),
      coreError('    engine_core = EngineCoreProc(*args, **kwargs)'),
      coreError('                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^'),
      coreError("RuntimeError: shape '[2048, 2048]' is invalid for input of size 16777216"),
      'Traceback (most recent call last):',
      '  File "/usr/local/bin/vllm", line 10, in <module>',
      'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
    ]);
    assert.deepEqual(events, [
      {
        type: 'fatal_reason',
        reason: "EngineCore failed to start: RuntimeError: shape '[2048, 2048]' is invalid for input of size 16777216",
      },
    ]);
  });

  const cases: Array<{ name: string; line: string; reason: string }> = [
    {
      name: 'CUDA out of memory',
      line: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB',
      reason:
        'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB',
    },
    {
      name: 'EngineDeadError',
      line: 'vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.',
      reason:
        'vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.',
    },
    {
      name: 'Engine core initialization failed',
      line: 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
      reason: 'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
    },
    { name: 'OOM killer', line: 'Killed', reason: 'Killed' },
    {
      name: 'port held by another process (uvicorn bind failure)',
      line: "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
      reason: "[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    },
  ];
  for (const { name, line, reason } of cases) {
    test(name, () => assert.deepEqual(fatalReasons(createVllmLogParser().push(line)), [reason]));
  }

  test('a top-level RuntimeError after an uncaught traceback is fatal', () => {
    const events = pushAll(createVllmLogParser(), [
      'Process EngineCore_0:',
      'Traceback (most recent call last):',
      '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
      '    self.run()',
      'RuntimeError: NCCL error: unhandled system error',
    ]);
    assert.deepEqual(fatalReasons(events), ['RuntimeError: NCCL error: unhandled system error']);
  });

  test('a RuntimeError in one request (`Exception in ASGI application`) is not fatal', () => {
    const events = pushAll(createVllmLogParser(), [
      '(APIServer pid=12345) ERROR:    Exception in ASGI application',
      'Traceback (most recent call last):',
      '  File "/usr/local/lib/python3.12/site-packages/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
      'RuntimeError: Expected all tensors to be on the same device',
    ]);
    assert.deepEqual(fatalReasons(events), []);
  });

  test('one fatal per start', () => {
    const parser = createVllmLogParser();
    parser.push(api('vLLM API server version 0.10.1'));
    const events = pushAll(parser, [
      freeMemory,
      'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}',
    ]);
    assert.equal(fatalReasons(events).length, 1);
    parser.push(api('vLLM API server version 0.10.1'));
    assert.equal(fatalReasons(parser.push('Killed')).length, 1);
  });

  test('configured fatal patterns', () => {
    const parser = createLogParser('vllm', ['NCCL WARN']);
    assert.deepEqual(fatalReasons(parser.push('node1:1234:5678 [0] NCCL WARN Cuda failure')), [
      'node1:1234:5678 [0] NCCL WARN Cuda failure',
    ]);
  });
});
