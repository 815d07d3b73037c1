/**
 * SGLang's log lines (ref section 2, 3 and 2.11), written through a LogWriter.
 * Scheduler lines carry `[YYYY-MM-DD HH:MM:SS TP0] `, the main process `[YYYY-MM-DD HH:MM:SS] `;
 * a multi-line message (traceback) is prefixed on its first line only, as Python logging does.
 */
import type { LogWriter, ProgressBar } from './log-writer.js';
import { gb, type MemoryFigures } from './memory.js';
import { accessText, clockText, type DecodeStats, type PrefillStats, type RuntimeLog } from './runtime-log.js';
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

const PKG = '/usr/local/lib/python3.12/dist-packages/sglang/srt';

const CUDA_GRAPH_HINTS = [
  'Possible solutions:',
  '1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)',
  '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)',
  '3. disable torch compile by not using --enable-torch-compile',
  '4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)',
  'Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ',
];

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
    const head = `Prefill batch${sep} #new-seq: ${s.newSeqs}, #new-token: ${s.newTokens}, #cached-token: 0, `;
    if (this.#c.version === 'old') {
      this.tp(
        `${head}cache hit rate: 0.00%, token usage: ${s.tokenUsage.toFixed(2)}, #running-req: ${s.running}, #queue-req: ${s.queued}`,
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
    this.schedulerException(
      [
        ...frame(
          'managers/scheduler.py',
          2810,
          'run_scheduler_process',
          'scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)',
        ),
        ...frame('managers/scheduler.py', 312, '__init__', 'self.tp_worker = TpModelWorker('),
        ...frame('managers/tp_worker.py', 78, '__init__', 'self.model_runner = ModelRunner('),
        ...frame('model_executor/model_runner.py', 245, '__init__', 'self.initialize(min_per_gpu_memory)'),
        ...frame('model_executor/model_runner.py', 318, 'initialize', 'self.init_memory_pool('),
        ...frame('model_executor/model_runner.py', 1294, 'init_memory_pool', 'raise RuntimeError('),
      ],
      ['RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'],
    );
  }

  captureOom(): void {
    const oom = `CUDA out of memory. Tried to allocate 448.00 MiB. GPU ${this.#c.gpu} has a total capacity of 79.19 GiB of which 301.06 MiB is free. Including non-PyTorch memory, this process has 78.88 GiB memory in use. Of the allocated memory 76.02 GiB is allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)`;
    this.schedulerException(
      [
        ...frame('model_executor/cuda_graph_runner.py', 380, '__init__', 'self.capture()'),
        ...frame('model_executor/cuda_graph_runner.py', 488, 'capture', ') = self.capture_one_batch_size(bs, forward)'),
        ...frame('model_executor/cuda_graph_runner.py', 652, 'capture_one_batch_size', 'run_once()'),
        ...frame(
          'model_executor/cuda_graph_runner.py',
          639,
          'run_once',
          'logits_output_or_pp_proxy_tensors = forward(',
        ),
        `torch.OutOfMemoryError: ${oom}`,
        '',
        'During handling of the above exception, another exception occurred:',
        '',
        'Traceback (most recent call last):',
        ...frame(
          'managers/scheduler.py',
          2810,
          'run_scheduler_process',
          'scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)',
        ),
        ...frame(
          'model_executor/model_runner.py',
          1661,
          'init_device_graphs',
          'self.cuda_graph_runner = CudaGraphRunner(self)',
        ),
        ...frame('model_executor/cuda_graph_runner.py', 382, '__init__', 'raise Exception('),
      ],
      [`Exception: Capture cuda graph failed: ${oom}`, ...CUDA_GRAPH_HINTS, ''],
    );
  }

  /** Runtime scheduler crash, e.g. after an illegal memory access. */
  runtimeException(message: string): void {
    this.schedulerException(
      [
        ...frame('managers/scheduler.py', 3012, 'run_scheduler_process', 'scheduler.event_loop_overlap()'),
        ...frame('managers/scheduler.py', 1021, 'event_loop_overlap', 'batch_result = self.run_batch(batch)'),
        ...frame(
          'managers/scheduler.py',
          2187,
          'run_batch',
          'batch_result = self.model_worker.forward_batch_generation(',
        ),
      ],
      [message],
    );
  }

  sigquitLaunch(): void {
    this.main('Received sigquit from a child process. It usually means the child failed.');
  }

  sigquitRunning(): void {
    this.main('SIGQUIT received. signum=None, frame=None. It usually means one child failed.');
  }

  warmupError(): void {
    const body = [
      'Traceback (most recent call last):',
      ...frame(
        'entrypoints/http_server.py',
        1401,
        '_execute_server_warmup',
        'assert res.status_code == 200, f"{res=}, {res.text=}"',
      ),
      "AssertionError: res=<Response [403]>, res.text='<html><body><h1>403 Forbidden</h1>Request forbidden by administrative rules.</body></html>'",
    ].join('\n');
    this.main(`Initialization failed. warmup error: ${body}`);
  }
}

function frame(file: string, line: number, fn: string, code: string): string[] {
  return [`  File "${PKG}/${file}", line ${line}, in ${fn}`, `    ${code}`];
}
