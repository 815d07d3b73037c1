/**
 * `fleetgate sim --fault-file PATH`: faults injected into an engine already running under
 * `fleetgate launch`, where no test holds its SimServer (bench/soak). The file names one mode:
 *
 * - at start, `not_enough_memory` or `cuda_oom_capture`: this run fails that way (its log shows the
 *   OOM, the process exits); the file is consumed, so the restart that follows starts cleanly;
 * - on SIGUSR2, `dp_rank_dead[:FRACTION]`, `scheduler_dead_http_alive`, `hang_after_ready` or
 *   `crash_after_ready`: the running server fails that way now; the file is consumed.
 */
import { readFileSync, rmSync } from 'node:fs';
import type { SimFailure, SimServer } from '../sim/index.js';

const AT_START = ['not_enough_memory', 'cuda_oom_capture'];

/** The file's mode and argument, removing the file; null when there is none. */
function take(path: string): { mode: string; arg: string | undefined } | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
  rmSync(path, { force: true });
  const [mode, arg] = text.split(':');
  return { mode, arg };
}

/** A start-up failure the file asks for, consumed; null if none (a runtime mode stays for SIGUSR2). */
export function startupFault(path: string): SimFailure | null {
  let text = '';
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
  if (!AT_START.includes(text)) return null;
  take(path);
  return { mode: text } as SimFailure;
}

/** On SIGUSR2, applies the file's runtime fault to `server`; returns the listener's remover. */
export function onFaultSignal(path: string, server: SimServer): () => void {
  const apply = () => {
    const fault = take(path);
    if (fault === null) return;
    if (fault.mode === 'dp_rank_dead') server.killDpRank(fault.arg === undefined ? undefined : Number(fault.arg));
    else if (fault.mode === 'scheduler_dead_http_alive') server.killScheduler();
    else if (fault.mode === 'hang_after_ready') server.hang();
    else if (fault.mode === 'crash_after_ready') void server.crash();
  };
  process.on('SIGUSR2', apply);
  return () => process.off('SIGUSR2', apply);
}
