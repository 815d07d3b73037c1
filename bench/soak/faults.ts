/**
 * The soak's fault schedule, drawn from a seed: which fault strikes when, and where. Pure; the fault
 * runner (fault-runner.ts) carries them out. Every kind comes once before any comes twice (a seeded
 * shuffle per round), at evenly spaced times with seeded jitter, between a quiet start and a quiet end.
 */
import { rng } from '../balance/workload.js';

export const FAULT_KINDS = [
  /** SIGKILL of an engine; `fleetgate launch` restarts it. */
  'sigkill',
  /** SIGSTOP of an engine, SIGCONT `durationMs` later: a hang. */
  'sigstop',
  /** One DP rank of an engine dies, HTTP up (`dp_rank_dead`): half its new requests get no byte. */
  'dp_rank_dead',
  /** An engine's scheduler dies with HTTP up (`scheduler_dead_http_alive`). */
  'scheduler_dead',
  /** An engine is killed and its restart fails with an OOM log (`not_enough_memory`), then starts cleanly. */
  'startup_oom',
  /** SIGHUP to fleetgate: a config reload. */
  'sighup',
  /** Admin drain of a backend, resume `durationMs` later. */
  'drain',
  /** A burst of clients that read their streams slowly. */
  'slow_readers',
  /** A burst of clients that abort mid-stream. */
  'client_aborts',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  atMs: number;
  kind: FaultKind;
  /** Index of the engine it strikes (for engine and drain faults); the runner moves on to a ready one. */
  engine: number;
  /** How long a stop or a drain lasts. */
  durationMs: number;
}

/** The workload's seeded PRNG (mulberry32), for a schedule too. */
export const seededRandom = rng;

export interface ScheduleOptions {
  seed: number;
  durationMs: number;
  count: number;
  engines: number;
  /** No fault before this, nor in the last `quietMs` of the run. */
  quietMs: number;
  kinds?: readonly FaultKind[];
}

export function planFaults(opts: ScheduleOptions): PlannedFault[] {
  const random = seededRandom(opts.seed);
  const kinds = opts.kinds ?? FAULT_KINDS;
  const span = opts.durationMs - 2 * opts.quietMs;
  if (span <= 0 || opts.count < 1) return [];
  const step = span / opts.count;
  const order: FaultKind[] = [];
  while (order.length < opts.count) {
    const round = [...kinds];
    for (let i = round.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [round[i], round[j]] = [round[j], round[i]];
    }
    order.push(...round);
  }
  return order.slice(0, opts.count).map((kind, i) => ({
    atMs: Math.round(opts.quietMs + step * i + random() * step * 0.5),
    kind,
    engine: Math.floor(random() * opts.engines),
    durationMs: Math.round(2_000 + random() * 6_000),
  }));
}

/** How many faults of each kind a plan (or a log of faults done) holds. */
export function countByKind(faults: readonly { kind: FaultKind }[]): Partial<Record<FaultKind, number>> {
  const counts: Partial<Record<FaultKind, number>> = {};
  for (const fault of faults) counts[fault.kind] = (counts[fault.kind] ?? 0) + 1;
  return counts;
}
