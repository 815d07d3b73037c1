/** Plausible GPU memory figures for the start-up lines (an 80 GB H100 and a bf16 model). */

export interface MemoryFigures {
  /** Free memory when weight loading begins. */
  availStart: number;
  weights: number;
  availAfterWeights: number;
  /** One of K or V, for `KV Cache is allocated. #tokens: N, K size: X GB, V size: X GB`. */
  kSize: number;
  availAfterKv: number;
  graph: number;
  availAfterGraph: number;
}

const GPU_FREE_GB = 78.55;
/** Llama-3.1-8B: 32 layers x 8 KV heads x 128 dims x 2 bytes per token for K (and again for V). */
const K_BYTES_PER_TOKEN = 32 * 8 * 128 * 2;

/** Parameter count in billions from a name like `Llama-3.1-8B-Instruct` (default 8). */
function paramsBillions(model: string): number {
  const match = /(\d+(?:\.\d+)?)[Bb](?![a-z])/.exec(model.split('/').pop() ?? model);
  return match ? Number(match[1]) : 8;
}

export function memoryFigures(model: string, maxTotalNumTokens: number): MemoryFigures {
  const weights = Math.min(60, paramsBillions(model) * 1.87);
  const availAfterWeights = GPU_FREE_GB - weights;
  const kSize = (maxTotalNumTokens * K_BYTES_PER_TOKEN) / 2 ** 30;
  const availAfterKv = Math.max(1.2, availAfterWeights - 2 * kSize);
  const graph = Math.min(1.44, availAfterKv / 4);
  return {
    availStart: GPU_FREE_GB,
    weights,
    availAfterWeights,
    kSize,
    availAfterKv,
    graph,
    availAfterGraph: availAfterKv - graph,
  };
}

export const gb = (value: number) => value.toFixed(2);

/** Batch sizes captured as CUDA graphs, like SGLang's `[1, 2, 4, 8, 16, 24, ...]`, `count` of them. */
export function captureBatchSizes(count: number): number[] {
  const sizes: number[] = [];
  for (const bs of [1, 2, 4, 8]) if (sizes.length < count) sizes.push(bs);
  for (let bs = 16; sizes.length < count; bs += 8) sizes.push(bs);
  return sizes;
}

/** The digits of a label like `gpu3`, used as the CUDA device in messages; 0 otherwise (e.g. `host:port`). */
export function gpuIndex(name: string): number {
  const match = /^[^:]*?(\d+)$/.exec(name);
  return match ? Number(match[1]) : 0;
}
