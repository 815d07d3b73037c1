/**
 * Start-up phases in words, shared by `fleetgate status`, `fleetgate wait` and the status page (which
 * embeds this table), so every view says "loading weights 66/83" the same way.
 */
import type { BackendStatus } from './fleet-summary.js';

export const PHASE_WORDS: Readonly<Record<string, string>> = {
  launching: 'launching',
  loading_weights: 'loading weights',
  allocating_kv_cache: 'allocating KV cache',
  capturing_cuda_graphs: 'capturing CUDA graphs',
  starting_http: 'starting HTTP server',
  warming_up: 'warming up',
  serving: 'serving',
};

/** `loading weights 66/83`, `warming up`, or null when the backend reports no phase. */
export function phaseText(backend: Pick<BackendStatus, 'phase' | 'progress'>): string | null {
  if (backend.phase === null) return null;
  const words = PHASE_WORDS[backend.phase] ?? backend.phase.replaceAll('_', ' ');
  const p = backend.progress;
  return p === null ? words : `${words} ${p.done}/${p.total}`;
}
