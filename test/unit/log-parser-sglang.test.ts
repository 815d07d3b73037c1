/**
 * The SGLang log parser against real log lines, quoted verbatim from
 * docs/sglang-vllm-behaviour.md (§2 start-up lines, §3 fatal errors, §1.2 and §1.5).
 * Where a line is only named there (a variant spelling), it is built from the documented format
 * and says so.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineSplitter } from '../../src/fleet/logs/line-splitter.js';
import type { LogEvent, LogParser } from '../../src/fleet/logs/log-events.js';
import { createLogParser } from '../../src/fleet/logs/log-parser.js';
import { createSglangLogParser } from '../../src/fleet/logs/sglang-log-parser.js';

/** SGLang's logger prefix (docs/sglang-vllm-behaviour.md §2 "Logger prefix"). */
const tp0 = (message: string) => `[2025-03-14 06:56:42 TP0] ${message}`;
const main = (message: string) => `[2025-11-30 11:18:05] ${message}`;

function pushAll(parser: LogParser, lines: string[]): LogEvent[] {
  return lines.flatMap((line) => parser.push(line));
}

/** Raw file text through the watcher's splitter, as the lead wires it. */
function feed(parser: LogParser, ...chunks: string[]): LogEvent[] {
  const splitter = new LineSplitter();
  return chunks.flatMap((chunk) => pushAll(parser, splitter.push(chunk)));
}

function phases(events: LogEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'phase' ? [event.phase] : []));
}

function only<T extends LogEvent['type']>(events: LogEvent[], type: T): Extract<LogEvent, { type: T }>[] {
  return events.filter((event): event is Extract<LogEvent, { type: T }> => event.type === type);
}

function lastPhase(parser: LogParser, line: string): Extract<LogEvent, { type: 'phase' }> {
  const events = only(parser.push(line), 'phase');
  assert.equal(events.length, 1, `one phase event for ${JSON.stringify(line)}`);
  return events[0];
}

/** A parser already in `phase` progress from an earlier line, so the next line can be tested alone. */
function startedParser(): LogParser {
  const parser = createSglangLogParser();
  parser.push(main("server_args=ServerArgs(model_path='/models/Llama-3.1-8B-Instruct', tp_size=1)"));
  return parser;
}

describe('SGLang start-up phases, older spelling (v0.4/v0.5)', () => {
  test('a full start in the documented order gives start, each phase in turn, then ready', () => {
    const parser = createSglangLogParser();
    const events = pushAll(parser, [
      main("server_args=ServerArgs(model_path='/models/Llama-3.1-8B-Instruct', tp_size=1)"),
      tp0('Init torch distributed begin.'),
      tp0('Init torch distributed ends. mem usage=1.96 GB'),
      tp0('Load weight begin. avail mem=137.34 GB'),
      tp0("Using model weights format ['*.safetensors']"),
      'Loading safetensors checkpoint shards:  72% Completed | 113/158 [00:16<00:06,  6.78it/s]',
      tp0('Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=20.45 GB'),
      tp0('KV Cache is allocated. #tokens: 834615, K size: 54.12 GB, V size: 54.12 GB'),
      tp0('Memory pool end. avail mem=14.61 GB'),
      tp0('Capture cuda graph begin. This can take up to several minutes. avail mem=13.95 GB'),
      tp0('Capture cuda graph bs [1, 2, 4, 8, ...]'),
      'Capturing batches (avail_mem=12.55 GB):  40%|████      | 21/52 [00:04<00:06, 4.9it/s]',
      tp0('Capture cuda graph end. Time elapsed: 5.92 s. mem usage=1.44 GB. avail mem=37.06 GB.'),
      tp0(
        'max_total_num_tokens=2261377, chunked_prefill_size=16384, max_prefill_tokens=16384, max_running_requests=4096, context_len=128000, available_gpu_mem=37.06 GB',
      ),
      main('INFO:     Started server process [177326]'),
      main('INFO:     Waiting for application startup.'),
      main('INFO:     Application startup complete.'),
      main('INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)'),
      main('"GET /get_model_info HTTP/1.1" 200 OK'),
      tp0(
        'Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: 0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0',
      ),
      main('"POST /generate HTTP/1.1" 200 OK'),
      main('The server is fired up and ready to roll!'),
      tp0(
        'Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0',
      ),
    ]);
    assert.deepEqual(events[0], { type: 'start' });
    assert.deepEqual(
      [...new Set(phases(events))],
      ['launching', 'loading_weights', 'allocating_kv_cache', 'capturing_cuda_graphs', 'starting_http', 'warming_up'],
    );
    assert.deepEqual(events.at(-1), { type: 'ready' });
    assert.equal(only(events, 'start').length, 1);
    assert.equal(only(events, 'fatal').length, 0);
  });

  test('2024 lines with the short `[HH:MM:SS TP0]` prefix and the old uvicorn lines', () => {
    const parser = createSglangLogParser();
    const events = pushAll(parser, [
      "[06:56:42 TP0] server_args=ServerArgs(model_path='x')",
      '[06:56:50 TP0] Load weight begin. avail mem=137.34 GB',
      '[06:57:50 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=20.45 GB',
      'INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)',
    ]);
    assert.deepEqual(phases(events), ['launching', 'loading_weights', 'allocating_kv_cache', 'warming_up']);
  });
});

describe('SGLang start-up phases, 2026 spelling', () => {
  test('server_args={...}, the longer Load weight end, KV Cache with dtype, and the renamed graph lines', () => {
    const parser = createSglangLogParser();
    const events = pushAll(parser, [
      main("server_args={'model_path': '/models/Qwen3-8B', 'tp_size': 1}"),
      tp0('Load weight begin. avail mem=137.34 GB'),
      'Multi-thread loading shards: 100% Completed | 65/65 [05:15<00:00, 4.85s/it]',
      tp0('Load weight end. elapsed=329.53 s, type=..., quant=fp8, ..., avail mem=29.67 GB, mem usage=80.31 GB.'),
      tp0('KV Cache is allocated. dtype: torch.bfloat16, #tokens: 387968, K size: 5.92 GB, V size: 5.92 GB'),
      tp0(
        'Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, ...], avail mem=12.41 GB',
      ),
      'Capturing batches (bs=512 avail_mem=3.10 GB):  40%|████      | 21/52 [00:04<00:06, 4.9it/s]',
      tp0('Capture target decode CUDA graph end. elapsed=10.10 s, mem usage=0.79 GB, avail mem=10.39 GB.'),
      tp0(
        'Engine startup timings (s): load_weight=..., kv_cache_allocation=..., scheduler_e2e=..., cuda_graph={...}, tokenizer_e2e=...',
      ),
      main('INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)'),
      tp0(
        'Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0',
      ),
      main('The server is fired up and ready to roll!'),
    ]);
    assert.deepEqual(events[0], { type: 'start' });
    assert.deepEqual(
      [...new Set(phases(events))],
      ['launching', 'loading_weights', 'allocating_kv_cache', 'capturing_cuda_graphs', 'starting_http', 'warming_up'],
    );
    assert.deepEqual(events.at(-1), { type: 'ready' });
  });

  // Reference §2 point 7 names `target verify`, `draft decode` and `target prefill` variants of the
  // 2026 line; these are the documented line with the variant's words.
  for (const variant of ['target verify', 'draft decode', 'target prefill']) {
    test(`Capture ${variant} CUDA graph begin/end mean capturing_cuda_graphs`, () => {
      const parser = startedParser();
      assert.equal(
        lastPhase(
          parser,
          tp0(
            `Capture ${variant} CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, ...], avail mem=12.41 GB`,
          ),
        ).phase,
        'capturing_cuda_graphs',
      );
    });
  }

  test('piecewise CUDA graph lines (late 2025+)', () => {
    const parser = startedParser();
    assert.equal(lastPhase(parser, 'Compiling num tokens (num_tokens=8192): ...').phase, 'capturing_cuda_graphs');
    const capturing = lastPhase(parser, 'Capturing num tokens (num_tokens=4 avail_mem=24.84 GB): 100%| ... | 74/74');
    assert.deepEqual(capturing.progress, { done: 74, total: 74 });
    assert.equal(capturing.etaSeconds, null);
    assert.deepEqual(
      parser.push(
        tp0('Capture piecewise CUDA graph end. Time elapsed: 58.13 s. mem usage=1.99 GB. avail mem=24.83 GB.'),
      ),
      [{ type: 'phase', phase: 'capturing_cuda_graphs', progress: null, etaSeconds: null }],
    );
  });
});

describe('SGLang progress bars', () => {
  test('weight bar: done/total and the remaining time', () => {
    const reading = lastPhase(
      startedParser(),
      'Loading safetensors checkpoint shards:  72% Completed | 113/158 [00:16<00:06,  6.78it/s]',
    );
    assert.deepEqual(reading, {
      type: 'phase',
      phase: 'loading_weights',
      progress: { done: 113, total: 158 },
      etaSeconds: 6,
    });
  });

  test('`Loading pt checkpoint shards:` (same documented bar format)', () => {
    const reading = lastPhase(
      startedParser(),
      'Loading pt checkpoint shards:  50% Completed | 4/8 [02:30<02:30, 37.50s/it]',
    );
    assert.deepEqual(reading.progress, { done: 4, total: 8 });
    assert.equal(reading.etaSeconds, 150);
  });

  test('the MM:SS, H:MM:SS and unknown (`?`) remaining times', () => {
    const parser = startedParser();
    assert.equal(
      lastPhase(parser, 'Multi-thread loading shards: 100% Completed | 65/65 [05:15<00:00, 4.85s/it]').etaSeconds,
      0,
    );
    assert.equal(
      lastPhase(parser, 'Multi-thread loading shards:  10% Completed | 13/130 [05:15<47:15, 4.85s/it]').etaSeconds,
      47 * 60 + 15,
    );
    // tqdm prints hours as H:MM:SS.
    assert.equal(
      lastPhase(parser, 'Multi-thread loading shards:   1% Completed | 2/130 [00:40<1:02:03, 20.1s/it]').etaSeconds,
      3723,
    );
    const unknown = lastPhase(
      parser,
      'Capturing batches (bs=512 avail_mem=3.10 GB):   0%| ... | 0/52 [00:04<?, ?it/s]',
    );
    assert.deepEqual(unknown.progress, { done: 0, total: 52 });
    assert.equal(unknown.etaSeconds, null);
  });

  test('carriage-return redraws through the splitter give one progress event per redraw, in order', () => {
    const parser = startedParser();
    const bar = (n: number) =>
      `Capturing batches (bs=${512 - n * 8} avail_mem=3.10 GB):  ${Math.round((n / 52) * 100)}%|█| ${n}/52 [00:04<00:06, 4.9it/s]`;
    const events = feed(
      parser,
      tp0('Capture cuda graph begin. This can take up to several minutes. avail mem=13.95 GB\n'),
      `\r${bar(1)}\r${bar(2)}`,
      `\r${bar(3)}\n`,
    );
    assert.deepEqual(
      only(events, 'phase').map((event) => event.progress?.done ?? null),
      [null, 1, 2, 3],
    );
  });

  test('the final 100% line, printed twice, is reported once', () => {
    const parser = startedParser();
    const done = 'Loading safetensors checkpoint shards: 100% Completed | 158/158 [00:23<00:00,  6.78it/s]';
    assert.equal(feed(parser, `${done}\n${done}\n`).length, 1);
  });

  test('redraws run together on one line: the last one wins (docs notebook output, sglang-vllm-behaviour.md §2)', () => {
    const parser = startedParser();
    const reading = lastPhase(
      parser,
      'Capturing batches (bs=4 avail_mem=1.00 GB):   0%|          | 0/3 [00:00<?, ?it/s]Capturing batches (bs=2 avail_mem=1.00 GB):  67%|██████▋   | 2/3 [00:01<00:00,  1.9it/s]',
    );
    assert.deepEqual(reading.progress, { done: 2, total: 3 });
    assert.equal(reading.etaSeconds, 0);
    // Verbatim from docs/sglang-vllm-behaviour.md: the last redraw is cut off, so only the phase is known.
    const cut = lastPhase(createSglangLogParser(), '0%|          | 0/3 [00:00<?, ?it/s]Capturing batches (bs=4 ...');
    assert.equal(cut.phase, 'capturing_cuda_graphs');
    assert.equal(cut.progress, null);
  });

  test('a line split across reads is parsed once complete', () => {
    const parser = startedParser();
    const events = feed(parser, tp0('Load weight be'), 'gin. avail mem=137.34 GB\n');
    assert.deepEqual(phases(events), ['loading_weights']);
  });
});

describe('SGLang warm-up and serving', () => {
  test('HTTP is up at `Uvicorn running on`: warming_up until the ready line (docs/sglang-vllm-behaviour.md §1.2)', () => {
    const parser = startedParser();
    assert.deepEqual(phases(parser.push(main('INFO:     Application startup complete.'))), ['starting_http']);
    assert.deepEqual(
      phases(parser.push(main('INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)'))),
      ['warming_up'],
    );
    assert.deepEqual(parser.push(main('The server is fired up and ready to roll!')), [{ type: 'ready' }]);
  });

  test('the warm-up request itself (access line, Prefill batch) means warming_up after HTTP started', () => {
    const parser = startedParser();
    parser.push(main('INFO:     Started server process [177326]'));
    assert.deepEqual(phases(parser.push(main('"GET /get_model_info HTTP/1.1" 200 OK'))), ['warming_up']);
  });

  test('a log with only runtime lines (rotated while serving) says serving', () => {
    const parser = createSglangLogParser();
    assert.deepEqual(
      phases(
        parser.push(
          tp0(
            'Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0',
          ),
        ),
      ),
      ['serving'],
    );
  });

  test('after ready, runtime lines add nothing', () => {
    const parser = startedParser();
    parser.push(main('The server is fired up and ready to roll!'));
    assert.deepEqual(
      parser.push(
        tp0(
          'Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0',
        ),
      ),
      [],
    );
  });

  test('within one start the phase never goes back; a new start resets it', () => {
    const parser = startedParser();
    parser.push(tp0('Capture cuda graph begin. This can take up to several minutes. avail mem=13.95 GB'));
    // Another DP rank still loading weights.
    assert.deepEqual(parser.push('[2025-03-14 06:56:42 DP1 TP1] Load weight begin. avail mem=137.34 GB'), []);
    const restart = parser.push(main("server_args=ServerArgs(model_path='x')"));
    assert.deepEqual(restart, [
      { type: 'start' },
      { type: 'phase', phase: 'launching', progress: null, etaSeconds: null },
    ]);
    assert.deepEqual(phases(parser.push(tp0('Load weight begin. avail mem=137.34 GB'))), ['loading_weights']);
  });
});

/** Feeds `lines` to a fresh started parser and returns the reasons of its fatal and refining events. */
function fatalReasons(lines: string[], parser: LogParser = startedParser()): string[] {
  return pushAll(parser, lines).flatMap((event) =>
    event.type === 'fatal' || event.type === 'fatal_reason' ? [event.reason] : [],
  );
}

describe('SGLang fatal lines (docs/sglang-vllm-behaviour.md §3, §1.5)', () => {
  const cases: Array<{ name: string; line: string; reason: string }> = [
    {
      name: 'not enough KV memory',
      line: 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
      reason: 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
    },
    {
      name: 'not enough KV memory, newer wording (PR #23181)',
      line: tp0('Not enough memory to allocate KV cache.'),
      reason: 'Not enough memory to allocate KV cache.',
    },
    {
      name: 'CUDA graph capture OOM',
      line: 'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 ...',
      reason:
        'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 ...',
    },
    {
      name: 'CUDA graph capture, gloo connection',
      line: 'Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection cl...',
      reason:
        'Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection cl...',
    },
    {
      name: 'port held by another process (uvicorn bind failure)',
      line: "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
      reason: "[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    },
    {
      name: 'distributed store timeout',
      line: 'torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/4 clients joined.',
      reason: 'torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/4 clients joined.',
    },
    {
      name: 'NCCL watchdog',
      line: '[rank0]:[E1014 12:00:00.000000000 ProcessGroupNCCL.cpp:1484] [PG 0 Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered',
      reason:
        'Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered',
    },
    {
      name: 'sigquit from a child',
      line: main('Received sigquit from a child process. It usually means the child failed.'),
      reason: 'Received sigquit from a child process. It usually means the child failed.',
    },
    {
      name: 'SIGQUIT in the running phase',
      line: main('SIGQUIT received. signum=None, frame=None. It usually means one child failed.'),
      reason: 'SIGQUIT received. signum=None, frame=None. It usually means one child failed.',
    },
    {
      name: 'scheduler is dead',
      line: main('Rank 0 scheduler is dead. Please check if there are relevant logs.'),
      reason: 'Rank 0 scheduler is dead. Please check if there are relevant logs.',
    },
    {
      name: 'scheduler died during initialization',
      line: main('Rank 0 scheduler died during initialization (exit code: -9) ...'),
      reason: 'Rank 0 scheduler died during initialization (exit code: -9) ...',
    },
    {
      name: 'initialization failed',
      line: main('Initialization failed. Please see the error messages above.'),
      reason: 'Initialization failed. Please see the error messages above.',
    },
    {
      name: 'tokenizer manager crash without a traceback',
      line: main('TokenizerManager hit an exception: ValueError: bad request'),
      reason: 'TokenizerManager hit an exception: ValueError: bad request',
    },
    { name: 'OOM killer (bash)', line: 'Killed', reason: 'Killed' },
    {
      name: 'OOM killer, from the launch script',
      line: './launch.sh: line 5: 177326 Killed                  python -m sglang.launch_server --port 30000',
      reason: './launch.sh: line 5: 177326 Killed python -m sglang.launch_server --port 30000',
    },
    {
      name: 'torch OOM',
      line: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB',
      reason:
        'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB',
    },
  ];
  for (const { name, line, reason } of cases) {
    test(name, () => assert.deepEqual(fatalReasons([line]), [reason]));
  }

  test('Scheduler hit an exception is fatal at its head; the exception line that ends its traceback refines the reason', () => {
    const parser = startedParser();
    assert.deepEqual(parser.push(tp0('Scheduler hit an exception: Traceback (most recent call last):')), [
      { type: 'fatal', reason: 'Scheduler hit an exception' },
    ]);
    const events = pushAll(parser, [
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process',
      '    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)',
      '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 889, in init_memory_pool',
      '    raise RuntimeError(',
      '        "Not enough memory. Please try to increase --mem-fraction-static."',
      'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
      '',
      main('Received sigquit from a child process. It usually means the child failed.'),
    ]);
    assert.deepEqual(events, [
      {
        type: 'fatal_reason',
        reason:
          'Scheduler hit an exception: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
      },
    ]);
  });

  test('Scheduler hit an exception with a bad checkpoint (KeyError, issue #9747)', () => {
    const reasons = fatalReasons([
      tp0('Scheduler hit an exception: Traceback (most recent call last):'),
      '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/loader.py", line 381, in load_model',
      '    param = params_dict[name]',
      '            ~~~~~~~~~~~^^^^^^',
      "KeyError: 'embed_tokens.weight'",
    ]);
    assert.deepEqual(reasons, [
      'Scheduler hit an exception',
      "Scheduler hit an exception: KeyError: 'embed_tokens.weight'",
    ]);
  });

  test('a chained capture failure with its `Possible solutions:` block is one fatal, refined once', () => {
    const reasons = fatalReasons([
      tp0('Scheduler hit an exception: Traceback (most recent call last):'),
      '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 307, in __init__',
      '    self.capture()',
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB',
      'During handling of the above exception, another exception occurred:',
      'Traceback (most recent call last):',
      '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 309, in __init__',
      '    raise Exception(',
      'Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 ...',
      'Possible solutions:',
      '1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)',
      '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)',
      '3. disable torch compile by not using --enable-torch-compile',
      '4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)',
      'Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose',
      main('Received sigquit from a child process. It usually means the child failed.'),
      main('Rank 0 scheduler is dead. Please check if there are relevant logs.'),
    ]);
    assert.deepEqual(reasons, [
      'Scheduler hit an exception',
      'Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB',
    ]);
  });

  test('every TP rank reporting the crash still gives one fatal, with the first exception line', () => {
    const reasons = fatalReasons([
      tp0('Scheduler hit an exception: Traceback (most recent call last):'),
      '[2025-03-14 06:56:42 TP1] Scheduler hit an exception: Traceback (most recent call last):',
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process',
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process',
      'RuntimeError: CUDA error: an illegal memory access was encountered',
      'RuntimeError: CUDA error: an illegal memory access was encountered',
    ]);
    assert.deepEqual(reasons, [
      'Scheduler hit an exception',
      'Scheduler hit an exception: RuntimeError: CUDA error: an illegal memory access was encountered',
    ]);
  });

  test('a traceback cut short by the sigquit line: the head stays the reason', () => {
    const parser = startedParser();
    assert.deepEqual(parser.push(tp0('Scheduler hit an exception: Traceback (most recent call last):')), [
      { type: 'fatal', reason: 'Scheduler hit an exception' },
    ]);
    const rest = pushAll(parser, [
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process',
      main('Received sigquit from a child process. It usually means the child failed.'),
      // Printed after another record: not this traceback's end.
      'RuntimeError: something later',
    ]);
    assert.deepEqual(rest, []);
  });

  test('a traceback that ends in a frame (the log stops): fatal at the head, nothing waits', () => {
    const parser = startedParser();
    const events = pushAll(parser, [
      '[2025-06-01 10:00:00 DP1 TP2] Scheduler hit an exception:',
      'Traceback (most recent call last):',
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1000, in event_loop_overlap',
    ]);
    assert.deepEqual(events, [{ type: 'fatal', reason: 'Scheduler hit an exception' }]);
  });

  test("a child process's uncaught exception (multiprocessing's `Process Process-6:`) is fatal at once", () => {
    const parser = startedParser();
    assert.deepEqual(parser.push('Process Process-6:'), [
      { type: 'fatal', reason: 'Process Process-6 ended on an exception' },
    ]);
    const events = pushAll(parser, [
      'Traceback (most recent call last):',
      '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',
      'OSError: [Errno 12] Cannot allocate memory',
    ]);
    assert.deepEqual(events, [
      {
        type: 'fatal_reason',
        reason: 'Process Process-6 ended on an exception: OSError: [Errno 12] Cannot allocate memory',
      },
    ]);
  });

  test('a frame wrapped at the terminal width leaves a word at column 0 that is not the exception line', () => {
    const reasons = fatalReasons([
      '[2025-05-14 12:00:03 DP2 TP2] Scheduler hit an exception: Traceback (most recent call last):',
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2271, in run_scheduler_proc',
      'ess',
      '    scheduler.event_loop_normal()',
      'AssertionError',
    ]);
    assert.deepEqual(reasons, ['Scheduler hit an exception', 'Scheduler hit an exception: AssertionError']);
  });

  test('a negative profiled KV budget is fatal with a memory reason, on the first rank that logs it', () => {
    const reasons = fatalReasons([
      '[2025-06-01 10:00:00 DP1 TP2] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.',
      '[2025-06-01 10:00:00 DP0 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.',
    ]);
    assert.deepEqual(reasons, [
      'Not enough memory for the KV cache: max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.',
    ]);
  });

  test('warm-up failure: `Initialization failed. warmup error:` with the assertion that ends the traceback', () => {
    const reasons = fatalReasons([
      main('Initialization failed. warmup error: Traceback (most recent call last):'),
      '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/http_server.py", line 1102, in _wait_and_warmup',
      '    assert res.status_code == 200, f"{res=}, {res.text=}"',
      "AssertionError: res=<Response [403]>, res.text='Forbidden'",
      main('Received sigquit from a child process. It usually means the child failed.'),
    ]);
    assert.deepEqual(reasons, [
      'Initialization failed. warmup error',
      "Initialization failed. warmup error: AssertionError: res=<Response [403]>, res.text='Forbidden'",
    ]);
  });

  test('reasons are cut to about 200 characters', () => {
    const [reason] = fatalReasons([`RuntimeError: Not enough memory. ${'x'.repeat(500)}`]);
    assert.ok(reason.length <= 200, `${reason.length} characters`);
    assert.ok(reason.startsWith('RuntimeError: Not enough memory.'));
  });

  test('not fatal: SIGTERM, a PD warm-up failure, a failed runtime weight reload, a positive profiled budget, source lines in a traceback', () => {
    const reasons = fatalReasons([
      main('SIGTERM received. signum=... frame=.... Draining requests and shutting down...'),
      main('Prefill disaggregation mode warm Up Failed, status code: 503'),
      main('Failed to get weights iterator: qwen/qwen2.5-0.5b-instruct-wrong (repository not found).'),
      // The reference's line (§2 point 6) with a positive value: SGLang then runs with the profiled budget.
      main('max_total_tokens=131072 is larger than the profiled value 105072. Use the profiled value instead.'),
      '        "Not enough memory. Please try to increase --mem-fraction-static."',
      'Possible solutions:',
      '1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)',
    ]);
    assert.deepEqual(reasons, []);
  });

  test('one fatal per start: a restart re-arms it', () => {
    const parser = startedParser();
    assert.equal(
      fatalReasons(['RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'], parser).length,
      1,
    );
    assert.equal(
      fatalReasons([main('Received sigquit from a child process. It usually means the child failed.')], parser).length,
      0,
    );
    const restart = pushAll(parser, [main("server_args=ServerArgs(model_path='x')")]);
    assert.deepEqual(restart[0], { type: 'start' });
    assert.deepEqual(fatalReasons(['Killed'], parser), ['Killed']);
  });

  test('a crash after ready is still reported (runtime scheduler crash, docs/sglang-vllm-behaviour.md §1.5)', () => {
    const parser = startedParser();
    parser.push(main('The server is fired up and ready to roll!'));
    const reasons = fatalReasons(
      [
        tp0('Scheduler hit an exception: Traceback (most recent call last):'),
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1000, in event_loop_overlap',
        'RuntimeError: CUDA error: an illegal memory access was encountered',
        main('SIGQUIT received. signum=None, frame=None. It usually means one child failed.'),
      ],
      parser,
    );
    assert.deepEqual(reasons, [
      'Scheduler hit an exception',
      'Scheduler hit an exception: RuntimeError: CUDA error: an illegal memory access was encountered',
    ]);
  });

  test('configured fatal patterns, tested against the raw line (also indented ones)', () => {
    const parser = createSglangLogParser({ fatalPatterns: [/NCCL WARN/, /^\s+Segmentation fault/] });
    assert.deepEqual(only(parser.push('node1:1234:5678 [0] NCCL WARN Cuda failure'), 'fatal'), [
      { type: 'fatal', reason: 'node1:1234:5678 [0] NCCL WARN Cuda failure' },
    ]);
    const second = createSglangLogParser({ fatalPatterns: [/^\s+Segmentation fault/] });
    assert.equal(only(second.push('   Segmentation fault (core dumped)'), 'fatal').length, 1);
  });
});

describe('createLogParser', () => {
  test('sglang kind compiles the configured patterns', () => {
    const parser = createLogParser('sglang', ['custom fatal \\d+']);
    assert.deepEqual(parser.push(main('custom fatal 42')), [{ type: 'fatal', reason: 'custom fatal 42' }]);
    assert.deepEqual(parser.push(main('The server is fired up and ready to roll!')), [{ type: 'ready' }]);
  });

  test('an invalid pattern names the config key', () => {
    assert.throws(
      () => createLogParser('sglang', ['ok', '(unclosed']),
      /health\.fatal_patterns\[1\] is not a valid regular expression/,
    );
  });

  test('openai kind: only configured patterns and out-of-memory are fatal, once', () => {
    const parser = createLogParser('openai', ['panicked at']);
    assert.deepEqual(
      pushAll(parser, [
        main('The server is fired up and ready to roll!'),
        main('Load weight begin. avail mem=137.34 GB'),
      ]),
      [],
    );
    assert.deepEqual(parser.push('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'), [
      { type: 'fatal', reason: 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.' },
    ]);
    assert.deepEqual(parser.push("thread 'main' panicked at src/main.rs:1"), []);
    assert.deepEqual(createLogParser('openai', ['panicked at']).push("thread 'main' panicked at src/main.rs:1"), [
      { type: 'fatal', reason: "thread 'main' panicked at src/main.rs:1" },
    ]);
    assert.equal(createLogParser('openai', []).push('Killed').length, 1);
  });
});
