/**
 * The tracebacks SGLang prints on its fatal errors (ref section 3): not enough KV memory, a CUDA
 * OOM during graph capture (with `CUDA_GRAPH_CAPTURE_FAILED_MSG`), a runtime scheduler exception,
 * and a failed warm-up request.
 */

const PKG = '/usr/local/lib/python3.12/dist-packages/sglang/srt';

function frame(file: string, line: number, fn: string, code: string): string[] {
  return [`  File "${PKG}/${file}", line ${line}, in ${fn}`, `    ${code}`];
}

const SCHEDULER_INIT = frame(
  'managers/scheduler.py',
  2810,
  'run_scheduler_process',
  'scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)',
);

const CUDA_GRAPH_HINTS = [
  'Possible solutions:',
  '1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)',
  '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)',
  '3. disable torch compile by not using --enable-torch-compile',
  '4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)',
  'Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ',
];

export interface Traceback {
  frames: string[];
  final: string[];
}

export const NOT_ENOUGH_MEMORY: Traceback = {
  frames: [
    ...SCHEDULER_INIT,
    ...frame('managers/scheduler.py', 312, '__init__', 'self.tp_worker = TpModelWorker('),
    ...frame('managers/tp_worker.py', 78, '__init__', 'self.model_runner = ModelRunner('),
    ...frame('model_executor/model_runner.py', 245, '__init__', 'self.initialize(min_per_gpu_memory)'),
    ...frame('model_executor/model_runner.py', 318, 'initialize', 'self.init_memory_pool('),
    ...frame('model_executor/model_runner.py', 1294, 'init_memory_pool', 'raise RuntimeError('),
  ],
  final: ['RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'],
};

export function captureOomTraceback(gpu: number): Traceback {
  const oom = `CUDA out of memory. Tried to allocate 448.00 MiB. GPU ${gpu} has a total capacity of 79.19 GiB of which 301.06 MiB is free. Including non-PyTorch memory, this process has 78.88 GiB memory in use. Of the allocated memory 76.02 GiB is allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)`;
  return {
    frames: [
      ...frame('model_executor/cuda_graph_runner.py', 380, '__init__', 'self.capture()'),
      ...frame('model_executor/cuda_graph_runner.py', 488, 'capture', ') = self.capture_one_batch_size(bs, forward)'),
      ...frame('model_executor/cuda_graph_runner.py', 652, 'capture_one_batch_size', 'run_once()'),
      ...frame('model_executor/cuda_graph_runner.py', 639, 'run_once', 'logits_output_or_pp_proxy_tensors = forward('),
      `torch.OutOfMemoryError: ${oom}`,
      '',
      'During handling of the above exception, another exception occurred:',
      '',
      'Traceback (most recent call last):',
      ...SCHEDULER_INIT,
      ...frame(
        'model_executor/model_runner.py',
        1661,
        'init_device_graphs',
        'self.cuda_graph_runner = CudaGraphRunner(self)',
      ),
      ...frame('model_executor/cuda_graph_runner.py', 382, '__init__', 'raise Exception('),
    ],
    final: [`Exception: Capture cuda graph failed: ${oom}`, ...CUDA_GRAPH_HINTS, ''],
  };
}

export const RUNTIME_FRAMES: string[] = [
  ...frame('managers/scheduler.py', 3012, 'run_scheduler_process', 'scheduler.event_loop_overlap()'),
  ...frame('managers/scheduler.py', 1021, 'event_loop_overlap', 'batch_result = self.run_batch(batch)'),
  ...frame('managers/scheduler.py', 2187, 'run_batch', 'batch_result = self.model_worker.forward_batch_generation('),
];

/** The usual cause: an HTTP proxy intercepting the warm-up's request to the server itself (set NO_PROXY). */
export const WARMUP_TRACEBACK = [
  'Traceback (most recent call last):',
  ...frame(
    'entrypoints/http_server.py',
    1401,
    '_execute_server_warmup',
    'assert res.status_code == 200, f"{res=}, {res.text=}"',
  ),
  "AssertionError: res=<Response [403]>, res.text='<html><body><h1>403 Forbidden</h1>Request forbidden by administrative rules.</body></html>'",
].join('\n');
