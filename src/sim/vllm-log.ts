/**
 * vLLM (V1 engine) log lines (ref section 6): `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:line] msg`
 * for the API server, `(EngineCore_DP0 pid=M) ...` for the engine; tqdm bars unprefixed.
 */
import type { LogWriter, ProgressBar } from './log-writer.js';
import type { MemoryFigures } from './memory.js';
import { accessText, type DecodeStats, type PrefillStats, type RuntimeLog } from './runtime-log.js';
import { completedMeter, standardMeter } from './tqdm.js';

export interface VllmLogContext {
  model: string;
  host: string;
  port: number;
  gpu: number;
  maxRunningRequests: number;
  maxTotalNumTokens: number;
  contextLen: number;
  memory: MemoryFigures;
  pid: number;
}

const VERSION = '0.11.0';

export class VllmLog implements RuntimeLog {
  #w: LogWriter;
  #c: VllmLogContext;
  #lastStatsMs = 0;

  constructor(writer: LogWriter, context: VllmLogContext) {
    this.#w = writer;
    this.#c = context;
  }

  get enabled(): boolean {
    return this.#w.enabled;
  }

  close(): void {
    this.#w.close();
  }

  #line(proc: 'api' | 'core', level: string, where: string, text: string): void {
    if (!this.#w.enabled) return;
    const who = proc === 'api' ? `(APIServer pid=${this.#c.pid})` : `(EngineCore_DP0 pid=${this.#c.pid + 71})`;
    this.#w.write(`${who} ${level} ${this.#w.shortTimestamp()} [${where}] ${text}\n`);
  }

  api(where: string, text: string, level = 'INFO'): void {
    this.#line('api', level, where, text);
  }

  core(where: string, text: string, level = 'INFO'): void {
    this.#line('core', level, where, text);
  }

  /** Uvicorn's own lines: `(APIServer pid=N) INFO:     Started server process [N]`. */
  uvicorn(text: string): void {
    if (this.#w.enabled) this.#w.write(`(APIServer pid=${this.#c.pid}) ${text}\n`);
  }

  launch(): void {
    const c = this.#c;
    this.api('api_server.py:1896', `vLLM API server version ${VERSION}`);
    this.api(
      'utils.py:233',
      `non-default args: {'model_tag': '${c.model}', 'host': '${c.host}', 'port': ${c.port}, 'model': '${c.model}', 'max_num_seqs': ${c.maxRunningRequests}}`,
    );
    this.api('model.py:547', 'Resolved architecture: LlamaForCausalLM');
    this.api('model.py:1510', 'Using max model len 131072');
    this.core(
      'core.py:77',
      `Initializing a V1 LLM engine (v${VERSION}) with config: model='${c.model}', speculative_config=None, tokenizer='${c.model}', dtype=torch.bfloat16, max_seq_len=${c.contextLen}, tensor_parallel_size=1, seed=0, served_model_name=${c.model}`,
    );
    this.core(
      'parallel_state.py:1208',
      'rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0',
    );
    this.core('gpu_model_runner.py:2602', `Starting to load model ${c.model}...`);
  }

  shardBar(total: number): ProgressBar {
    return this.#w.bar('Loading safetensors checkpoint shards', total, completedMeter);
  }

  weightsLoaded(elapsedSeconds: number): void {
    this.core('default_loader.py:267', `Loading weights took ${elapsedSeconds.toFixed(2)} seconds`);
    this.core(
      'gpu_model_runner.py:2653',
      `Model loading took ${this.#c.memory.weights.toFixed(4)} GiB and ${elapsedSeconds.toFixed(6)} seconds`,
    );
  }

  kvAllocated(): void {
    const c = this.#c;
    this.core('gpu_worker.py:298', `Available KV cache memory: ${(2 * c.memory.kSize).toFixed(2)} GiB`);
    this.core('kv_cache_utils.py:1087', `GPU KV cache size: ${c.maxTotalNumTokens.toLocaleString('en-US')} tokens`);
    this.core(
      'kv_cache_utils.py:1091',
      `Maximum concurrency for ${c.contextLen.toLocaleString('en-US')} tokens per request: ${(c.maxTotalNumTokens / c.contextLen).toFixed(2)}x`,
    );
  }

  captureBar(total: number): ProgressBar {
    return this.#w.bar('Capturing CUDA graphs (decode, FULL)', total, standardMeter);
  }

  captureEnd(elapsedSeconds: number): void {
    this.core(
      'gpu_model_runner.py:3480',
      `Graph capturing finished in ${Math.round(elapsedSeconds)} secs, took ${this.#c.memory.graph.toFixed(2)} GiB`,
    );
  }

  engineReady(totalSeconds: number): void {
    this.core(
      'core.py:210',
      `init engine (profile, create kv cache, warmup model) took ${totalSeconds.toFixed(2)} seconds`,
    );
  }

  serverUp(): void {
    this.api('api_server.py:1634', "Supported_tasks: ['generate']");
    this.api('api_server.py:1912', `Starting vLLM API server 0 on http://${this.#c.host}:${this.#c.port}`);
    this.api('launcher.py:34', 'Available routes are:');
    for (const route of ['/health', '/metrics', '/ping', '/v1/models', '/v1/chat/completions', '/v1/completions']) {
      this.api('launcher.py:42', `Route: ${route}, Methods: ${route.startsWith('/v1/c') ? 'POST' : 'GET'}`);
    }
    this.uvicorn(`INFO:     Started server process [${this.#c.pid}]`);
    this.uvicorn('INFO:     Waiting for application startup.');
    this.uvicorn('INFO:     Application startup complete.');
  }

  bindFailed(): void {
    this.api(
      'api_server.py:1930',
      `OSError: [Errno 98] Address already in use ('${this.#c.host}', ${this.#c.port})`,
      'ERROR',
    );
  }

  access(client: string, method: string, path: string, status: number): void {
    this.uvicorn(accessText(client, method, path, status));
  }

  /** vLLM logs throughput every 10 s rather than per batch. */
  prefill(_: PrefillStats): void {}

  decode(s: DecodeStats): void {
    const now = Date.now();
    if (now - this.#lastStatsMs < 10_000) return;
    this.#lastStatsMs = now;
    this.api(
      'loggers.py:123',
      `Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: ${s.genThroughput.toFixed(1)} tokens/s, Running: ${s.running} reqs, Waiting: ${s.queued} reqs, GPU KV cache usage: ${(100 * s.tokenUsage).toFixed(1)}%, Prefix cache hit rate: 0.0%`,
    );
  }

  retract(count: number): void {
    this.core('scheduler.py:281', `Preempted ${count} request(s) because the KV cache is full`, 'WARNING');
  }

  deprecated(): void {}

  healthFailed(): void {}

  /** Start-up failure: the engine core dies and the API server gives up. */
  initFailed(exceptionLines: string[]): void {
    this.core('core.py:718', 'EngineCore failed to start.', 'ERROR');
    if (this.#w.enabled) this.#w.write(`Traceback (most recent call last):\n${exceptionLines.join('\n')}\n`);
    if (this.#w.enabled) {
      this.#w.write('RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n');
    }
  }

  notEnoughMemory(): void {
    this.initFailed([
      `ValueError: Free memory on device cuda:${this.#c.gpu} (12.11/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.`,
    ]);
  }

  captureOom(): void {
    this.initFailed([
      `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU ${this.#c.gpu} has a total capacity of 79.19 GiB of which 301.06 MiB is free.`,
    ]);
  }

  /** A dead engine after ready (`EngineDeadError`). */
  engineDead(message: string): void {
    this.core('core.py:790', 'EngineCore encountered a fatal error.', 'ERROR');
    if (this.#w.enabled) this.#w.write(`Traceback (most recent call last):\n${message}\n`);
    this.api('async_llm.py:480', 'AsyncLLM output_handler failed.', 'ERROR');
    if (this.#w.enabled) {
      this.#w.write(
        'vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n',
      );
    }
  }

  shutdown(): void {
    this.uvicorn('INFO:     Shutting down');
    this.uvicorn(`INFO:     Finished server process [${this.#c.pid}]`);
  }
}
