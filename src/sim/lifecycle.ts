/**
 * The start-up script of one simulated launch, up to "ready": log lines, phases, the moment the
 * port opens and the scripted start-up failures. SGLang (ref 1.1, 1.2, 2, 3): weights, KV pool and
 * CUDA graphs with the port closed, then uvicorn, the server's own warm-up, the ready line.
 * vLLM (ref 6): the engine is fully built before the port opens; no warm-up gate.
 */
import { captureBatchSizes } from './memory.js';
import { loopbackClient } from './runtime-log.js';
import type { SglangLog } from './sglang-log.js';
import type { SimFailure, SimStatus, SimTiming } from './types.js';
import type { VllmLog } from './vllm-log.js';

export interface LaunchHost {
  readonly timing: SimTiming;
  readonly failure: SimFailure | null;
  readonly pid: number;
  /** False once this launch was stopped or replaced; the script then ends quietly. */
  alive(): boolean;
  sleep(ms: number): Promise<void>;
  setStatus(status: SimStatus): void;
  /** Opens the port; false if the address is taken. */
  listen(): Promise<boolean>;
  /** Runs the warm-up generation (8 tokens) through the engine. */
  warmup(extraMs: number): Promise<void>;
  /** The process is gone after a fatal error. */
  exit(reason: string): void;
  ready(): void;
}

const seconds = (since: number) => (performance.now() - since) / 1000;

function failureAt(failure: SimFailure | null, batches: number): { mode: 'oom' | 'hang'; at: number } | null {
  if (failure?.mode === 'cuda_oom_capture' || failure?.mode === 'hang_capture') {
    const at = Math.min(batches - 1, Math.max(0, failure.atBatch ?? Math.floor(batches / 2)));
    return { mode: failure.mode === 'cuda_oom_capture' ? 'oom' : 'hang', at };
  }
  return null;
}

async function loadShards(host: LaunchHost, bar: { update(n: number): void; close(): void }): Promise<boolean> {
  for (let i = 1; i <= host.timing.shards; i++) {
    await host.sleep(host.timing.shardMs);
    if (!host.alive()) return false;
    bar.update(i);
  }
  bar.close();
  return true;
}

/** Both engines allocate the KV cache after the weights, then capture graphs; false when the process died meanwhile. */
async function allocateKvCache(host: LaunchHost, log: { kvAllocated(): void }): Promise<boolean> {
  host.setStatus('allocating_kv_cache');
  await host.sleep(host.timing.kvMs);
  if (!host.alive()) return false;
  log.kvAllocated();
  host.setStatus('capturing_cuda_graphs');
  return true;
}

/** The HTTP port opens last, as both engines do; false when the process died or the bind failed (it exits). */
async function openHttpPort(host: LaunchHost, log: { bindFailed(): void }): Promise<boolean> {
  await host.sleep(host.timing.httpMs);
  if (!host.alive()) return false;
  if (!(await host.listen())) {
    log.bindFailed();
    host.exit('address already in use');
    return false;
  }
  return host.alive();
}

export async function launchSglang(host: LaunchHost, log: SglangLog): Promise<void> {
  const t = host.timing;
  await host.sleep(t.startDelayMs);
  if (!host.alive()) return;
  const started = performance.now();
  log.serverArgs();
  log.initDistributed();
  log.loadWeightBegin();
  if (!(await loadShards(host, log.shardBar(t.shards)))) return;
  log.loadWeightEnd(seconds(started));
  if (host.failure?.mode === 'not_enough_memory') {
    log.notEnoughMemory();
    log.sigquitLaunch();
    return host.exit('RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.');
  }

  if (!(await allocateKvCache(host, log))) return;
  const captureStart = performance.now();
  const sizes = captureBatchSizes(t.graphBatches);
  const order = [...sizes].reverse();
  log.captureBegin(sizes);
  const bar = log.captureBar(order.length, log.captureDesc(order[0], 0));
  const fail = failureAt(host.failure, order.length);
  for (let i = 0; i < order.length; i++) {
    if (fail?.at === i) {
      if (fail.mode === 'hang') {
        // A hung capture prints nothing more (ref 3: custom all-reduce, multi-node).
        return host.setStatus('hung');
      }
      bar.abandon();
      log.captureOom();
      log.sigquitLaunch();
      return host.exit('Exception: Capture cuda graph failed: CUDA out of memory');
    }
    await host.sleep(t.graphBatchMs);
    if (!host.alive()) return;
    const next = i + 1 < order.length ? log.captureDesc(order[i + 1], (i + 1) / order.length) : undefined;
    bar.update(i + 1, next);
  }
  bar.close();
  log.captureEnd(seconds(captureStart));
  log.schedulerReady();

  if (!(await openHttpPort(host, log))) return;
  log.uvicornUp(host.pid);
  host.setStatus('warming_up');

  // `_wait_and_warmup` (ref 1.2): poll the model info endpoint, then one real /generate.
  await host.sleep(t.warmupMs / 2);
  if (!host.alive()) return;
  if (host.failure?.mode === 'warmup_failure') {
    log.warmupError();
    return host.exit('Initialization failed. warmup error');
  }
  log.access(loopbackClient(), 'GET', log.oldVersion ? '/get_model_info' : '/model_info', 200);
  await host.warmup(t.warmupMs / 2);
  if (!host.alive()) return;
  log.access(loopbackClient(), 'POST', '/generate', 200);
  log.ready();
  host.ready();
}

export async function launchVllm(host: LaunchHost, log: VllmLog): Promise<void> {
  const t = host.timing;
  await host.sleep(t.startDelayMs);
  if (!host.alive()) return;
  const started = performance.now();
  log.launch();
  // vLLM checks free memory before it loads anything.
  if (host.failure?.mode === 'not_enough_memory') {
    log.notEnoughMemory();
    return host.exit('ValueError: Free memory on device on startup is less than desired GPU memory utilization');
  }
  if (!(await loadShards(host, log.shardBar(t.shards)))) return;
  log.weightsLoaded(seconds(started));

  if (!(await allocateKvCache(host, log))) return;
  const captureStart = performance.now();
  const total = t.graphBatches;
  const bar = log.captureBar(total);
  const fail = failureAt(host.failure, total);
  for (let i = 0; i < total; i++) {
    if (fail?.at === i) {
      if (fail.mode === 'hang') return host.setStatus('hung');
      bar.abandon();
      log.captureOom();
      return host.exit('torch.OutOfMemoryError: CUDA out of memory');
    }
    await host.sleep(t.graphBatchMs);
    if (!host.alive()) return;
    bar.update(i + 1);
  }
  bar.close();
  log.captureEnd(seconds(captureStart));
  await host.sleep(t.warmupMs);
  if (!host.alive()) return;
  if (host.failure?.mode === 'warmup_failure') {
    log.initFailed(['RuntimeError: CUDA error: an illegal memory access was encountered']);
    return host.exit('Engine core initialization failed');
  }
  log.engineReady(seconds(started));

  if (!(await openHttpPort(host, log))) return;
  log.serverUp();
  host.ready();
}
