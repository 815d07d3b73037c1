/**
 * SGLang's log lines (ref section 2, 3 and 2.11), written through a LogWriter.
 * Scheduler lines carry `[YYYY-MM-DD HH:MM:SS TP0] `, the main process `[YYYY-MM-DD HH:MM:SS] `;
 * a multi-line message (traceback) is prefixed on its first line only, as Python logging does.
 */
import type { LogWriter, ProgressBar } from './log-writer.js';
import { gb, type MemoryFigures } from './memory.js';
import { accessText, clockText, type DecodeStats, type PrefillStats, type RuntimeLog } from './runtime-log.js';
import { captureOomTraceback, NOT_ENOUGH_MEMORY, RUNTIME_FRAMES, WARMUP_TRACEBACK } from './sglang-tracebacks.js';
import { completedMeter, standardMeter } from './tqdm.js';

export interface SglangLogContext {
  model: string;
  host: string;
  port: number;
  gpu: number;
  version: 'new' | 'old';
  maxRunningRequests: number;
  maxTotalNumTokens: number;
  contextLen: number;
  apiKey: string | null;
  enableMetrics: boolean;
  memory: MemoryFigures;
}

export class SglangLog implements RuntimeLog {
  #w: LogWriter;
  #c: SglangLogContext;

  constructor(writer: LogWriter, context: SglangLogContext) {
    this.#w = writer;
    this.#c = context;
  }

  get enabled(): boolean {
    return this.#w.enabled;
  }

  get oldVersion(): boolean {
    return this.#c.version === 'old';
  }

  /** Main-process line. */
  main(text: string): void {
    if (this.#w.enabled) this.#w.write(`[${this.#w.timestamp()}] ${text}\n`);
  }

  /** Scheduler (TP rank 0) line. */
  tp(text: string): void {
    if (this.#w.enabled) this.#w.write(`[${this.#w.timestamp()} TP0] ${text}\n`);
  }

  close(): void {
    this.#w.close();
  }

  serverArgs(): void {
    const c = this.#c;
    const q = (v: string | null) => (v === null ? 'None' : `'${v}'`);
    const args = [
      `model_path=${q(c.model)}`,
      `tokenizer_path=${q(c.model)}`,
      "tokenizer_mode='auto'",
      'skip_tokenizer_init=False',
      "load_format='auto'",
      'trust_remote_code=False',
      "dtype='auto'",
      "kv_cache_dtype='auto'",
      'quantization=None',
      'context_length=None',
      "device='cuda'",
      `served_model_name=${q(c.model)}`,
      `host=${q(c.host)}`,
      `port=${c.port}`,
      'mem_fraction_static=0.88',
      `max_running_requests=${c.maxRunningRequests}`,
      `max_total_tokens=${c.maxTotalNumTokens}`,
      'chunked_prefill_size=8192',
      'max_prefill_tokens=16384',
      "schedule_policy='fcfs'",
      'tp_size=1',
      'stream_interval=1',
      'random_seed=42',
      'watchdog_timeout=300',
      `base_gpu_id=${c.gpu}`,
      "log_level='info'",
      `enable_metrics=${c.enableMetrics ? 'True' : 'False'}`,
      'decode_log_interval=40',
      `api_key=${q(c.apiKey)}`,
      'dp_size=1',
      'disable_cuda_graph=False',
      'cuda_graph_max_bs=None',
      'skip_server_warmup=False',
    ];
    this.main(`server_args=ServerArgs(${args.join(', ')})`);
  }

  initDistributed(): void {
    this.tp('Init torch distributed begin.');
    this.tp('Init torch distributed ends. mem usage=0.00 GB');
  }

  loadWeightBegin(): void {
    this.tp(`Load weight begin. avail mem=${gb(this.#c.memory.availStart)} GB`);
    this.tp("Using model weights format ['*.safetensors']");
  }

  shardBar(total: number): ProgressBar {
    return this.#w.bar('Loading safetensors checkpoint shards', total, completedMeter);
  }

  loadWeightEnd(elapsedSeconds: number): void {
    const m = this.#c.memory;
    const tail = `dtype=torch.bfloat16, avail mem=${gb(m.availAfterWeights)} GB, mem usage=${gb(m.weights)} GB.`;
    if (this.#c.version === 'old') this.tp(`Load weight end. type=LlamaForCausalLM, ${tail}`);
    else this.tp(`Load weight end. elapsed=${elapsedSeconds.toFixed(2)} s, type=LlamaForCausalLM, ${tail}`);
  }

  kvAllocated(): void {
    const c = this.#c;
    const k = gb(c.memory.kSize);
    const dtype = c.version === 'old' ? '' : 'dtype: torch.bfloat16, ';
    this.tp(`KV Cache is allocated. ${dtype}#tokens: ${c.maxTotalNumTokens}, K size: ${k} GB, V size: ${k} GB`);
    this.tp(`Memory pool end. avail mem=${gb(c.memory.availAfterKv)} GB`);
  }

  captureBegin(sizes: number[]): void {
    const avail = gb(this.#c.memory.availAfterKv);
    if (this.#c.version === 'old') {
      this.tp(`Capture cuda graph begin. This can take up to several minutes. avail mem=${avail} GB`);
      this.tp(`Capture cuda graph bs [${sizes.join(', ')}]`);
    } else {
      this.tp(
        `Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[${sizes.join(', ')}], avail mem=${avail} GB`,
      );
    }
  }

  /** Description of the capture bar for one batch size; memory shrinks as graphs are captured. */
  captureDesc(bs: number, fractionDone: number): string {
    const m = this.#c.memory;
    const avail = m.availAfterKv - m.graph * fractionDone;
    return this.#c.version === 'old'
      ? `Capturing batches (avail_mem=${gb(avail)} GB)`
      : `Capturing batches (bs=${bs} avail_mem=${gb(avail)} GB)`;
  }

  captureBar(total: number, firstDesc: string): ProgressBar {
    return this.#w.bar(firstDesc, total, standardMeter);
  }

  captureEnd(elapsedSeconds: number): void {
    const m = this.#c.memory;
    if (this.#c.version === 'old') {
      this.tp(
        `Capture cuda graph end. Time elapsed: ${elapsedSeconds.toFixed(2)} s. mem usage=${gb(m.graph)} GB. avail mem=${gb(m.availAfterGraph)} GB.`,
      );
    } else {
      this.tp(
        `Capture target decode CUDA graph end. elapsed=${elapsedSeconds.toFixed(2)} s, mem usage=${gb(m.graph)} GB, avail mem=${gb(m.availAfterGraph)} GB.`,
      );
    }
  }

  schedulerReady(): void {
    const c = this.#c;
    this.tp(
      `max_total_num_tokens=${c.maxTotalNumTokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=${c.maxRunningRequests}, context_len=${c.contextLen}, available_gpu_mem=${gb(c.memory.availAfterGraph)} GB`,
    );
  }

  uvicornUp(pid: number): void {
    this.main(`INFO:     Started server process [${pid}]`);
    this.main('INFO:     Waiting for application startup.');
    this.main('INFO:     Application startup complete.');
    this.main(`INFO:     Uvicorn running on http://${this.#c.host}:${this.#c.port} (Press CTRL+C to quit)`);
  }

  bindFailed(): void {
    this.main(
      `ERROR:    [Errno 98] error while attempting to bind on address ('${this.#c.host}', ${this.#c.port}): address already in use`,
    );
  }

  ready(): void {
    this.main('The server is fired up and ready to roll!');
  }

  access(client: string, method: string, path: string, status: number): void {
    this.main(accessText(client, method, path, status));
  }

  prefill(s: PrefillStats): void {
    const sep = this.#c.version === 'old' ? '.' : ',';
    const head = `Prefill batch${sep} #new-seq: ${s.newSeqs}, #new-token: ${s.newTokens}, #cached-token: ${s.cachedTokens}, `;
    if (this.#c.version === 'old') {
      this.tp(
        `${head}cache hit rate: ${((100 * s.cachedTokens) / Math.max(1, s.newTokens + s.cachedTokens)).toFixed(2)}%, token usage: ${s.tokenUsage.toFixed(2)}, #running-req: ${s.running}, #queue-req: ${s.queued}`,
      );
    } else {
      this.tp(
        `${head}token usage: ${s.tokenUsage.toFixed(2)}, #running-req: ${s.running}, #queue-req: ${s.queued}, input throughput (token/s): ${s.inputThroughput.toFixed(2)}`,
      );
    }
  }

  decode(s: DecodeStats): void {
    const usage = s.tokenUsage.toFixed(2);
    const gen = s.genThroughput.toFixed(2);
    if (this.#c.version === 'old') {
      this.tp(
        `Decode batch. #running-req: ${s.running}, #token: ${s.usedTokens}, token usage: ${usage}, gen throughput (token/s): ${gen}, #queue-req: ${s.queued}`,
      );
    } else {
      this.tp(
        `Decode batch, #running-req: ${s.running}, #token: ${s.usedTokens}, token usage: ${usage}, cuda graph: True, gen throughput (token/s): ${gen}, #queue-req: ${s.queued}`,
      );
    }
  }

  retract(count: number, ratioBefore: number, ratioAfter: number): void {
    this.tp(
      `KV cache pool is full. Retract requests. #retracted_reqs: ${count}, #new_token_ratio: ${ratioBefore.toFixed(4)} -> ${ratioAfter.toFixed(4)}`,
    );
  }

  deprecated(path: string, replacement: string): void {
    this.main(
      `Endpoint '${path}' is deprecated and will be removed in a future version. Please use '${replacement}' instead.`,
    );
  }

  healthFailed(ticMs: number, lastMs: number): void {
    this.main(
      `Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. tic start time: ${clockText(ticMs)}. last_heartbeat time: ${clockText(lastMs)}`,
    );
  }

  /** `Scheduler hit an exception: Traceback ...` ending in `finalLines`. */
  schedulerException(frames: string[], finalLines: string[]): void {
    const body = ['Traceback (most recent call last):', ...frames, ...finalLines].join('\n');
    this.tp(`Scheduler hit an exception: ${body}\n`);
  }

  notEnoughMemory(): void {
    this.schedulerException(NOT_ENOUGH_MEMORY.frames, NOT_ENOUGH_MEMORY.final);
  }

  captureOom(): void {
    const { frames, final } = captureOomTraceback(this.#c.gpu);
    this.schedulerException(frames, final);
  }

  /** Runtime scheduler crash, e.g. after an illegal memory access. */
  runtimeException(message: string): void {
    this.schedulerException(RUNTIME_FRAMES, [message]);
  }

  sigquitLaunch(): void {
    this.main('Received sigquit from a child process. It usually means the child failed.');
  }

  sigquitRunning(): void {
    this.main('SIGQUIT received. signum=None, frame=None. It usually means one child failed.');
  }

  warmupError(): void {
    this.main(`Initialization failed. warmup error: ${WARMUP_TRACEBACK}`);
  }
}
