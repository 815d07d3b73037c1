/**
 * Which registry states mean a supervised engine must be restarted. The registry's state and reason
 * are the only input, so a new detector (e.g. the progress watchdog) needs one condition here.
 */
import type { BackendState } from '../fleet/backend-lifecycle.js';
import type { RestartReason } from '../fleet/registry.js';

/**
 * The progress watchdog marks an engine whose HTTP answers but whose scheduler makes no progress, or
 * one of whose DP ranks is dead (its streams get no first byte while later ones do).
 */
const NO_PROGRESS = /progress|dead DP rank/i;

export function restartTrigger(state: BackendState, reason: string | null): RestartReason | null {
  if (state === 'failed') return 'failed';
  if (state === 'starting' && reason === 'stalled') return 'stalled';
  if (state === 'unhealthy' && reason !== null && NO_PROGRESS.test(reason)) return 'no_progress';
  return null;
}
