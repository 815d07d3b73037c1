/**
 * `max_inflight_per_backend: auto`: a cap that follows what each backend can run right now, so
 * requests wait in fleetgate's central queue, not in a backend's own, and go to whichever backend
 * frees capacity first. A backend's concurrency is limited by `max_running_requests` and, under KV
 * pressure, by its KV cache: long answers grow, admission stalls, and what a least-connections
 * balancer sent it sits in its queue while another GPU has room. Pure: one step per load report.
 *
 * The rule, in the spirit of a congestion window: a backend that queues at two reports in a row (or
 * whose KV cache is nearly full) can take no more than it runs, so the cap closes to fleetgate's
 * requests on it minus the ones waiting in its queue, plus a small allowance (a freed slot is
 * refilled inside the backend at its next step, without waiting for fleetgate's round trip). With
 * one fleetgate that is what the backend runs + the allowance; with several replicas and
 * `routing.cap_scope: fleet`, `inflight` is what every replica holds there (the backend's figures), so
 * each closes to the same cap, held against the same fleet-wide load (cap-controller.ts). A queue seen once holds
 * the cap where it is: it may be a burst of arrivals the scheduler has not admitted yet (every batch
 * job starts with one), which a closed cap would hold back for seconds while the backend has room.
 * Nor does a queue at a backend with free batch slots and a nearly empty KV cache close it: such a
 * backend has room, and its queue is the arrivals of the last few milliseconds waiting for the next
 * scheduler step (at thousands of small requests per second there always are some). A closed cap
 * would not make it admit faster; it would only hold requests in fleetgate and starve the backend.
 * The KV mark is low because SGLang admits by reservation: with long `max_tokens` a pool a fifth full
 * can already refuse admission (the figures behind 10%: bench/README, "The 10% mark").
 * A backend with no queue and KV room whose cap was reached may take more: the cap opens by a quarter.
 */

import { QUEUE_ALLOWANCE } from './backend-load.js';

/**
 * The cap of a backend whose load fleetgate has not read yet: one that was just admitted, or came
 * back. Uncapped, it would take the whole central queue at once (a batch job whose script started
 * before the fleet holds thousands there) before its first report said what it can run, as
 * HAProxy's `slowstart` and Envoy's slow start mode keep a new server from taking a full share at
 * once. fleetgate reads a backend's load as soon as it turns ready, so this lasts one scrape.
 */
export const UNREAD_CAP = QUEUE_ALLOWANCE;
/** KV usage from which a backend counts as full even with an empty queue. */
export const KV_FULL = 0.92;
/** KV usage below which a backend with free batch slots has room, whatever its queue. */
export const KV_NEARLY_EMPTY = 0.1;
const GROWTH = 0.25;

export interface CapReport {
  running: number;
  queued: number;
  /** KV usage 0..1, when reported. */
  tokenUsage: number | null;
  /** The backend's `max_running_requests`, when reported. */
  maxRunning: number | null;
  /** `queued` at the previous report; null for the first. */
  queuedBefore: number | null;
}

/**
 * The next cap. `previous`: the cap in force (0 = none yet); `inflight`: fleetgate's requests on the
 * backend when the report was taken.
 */
export function nextAdaptiveCap(report: CapReport, previous: number, inflight: number, slowStart = false): number {
  const ceiling = report.maxRunning !== null ? report.maxRunning + QUEUE_ALLOWANCE : Number.POSITIVE_INFINITY;
  const queueing = report.queued >= QUEUE_ALLOWANCE;
  const kvFull = report.tokenUsage !== null && report.tokenUsage >= KV_FULL;
  const stillQueueing = queueing && report.queuedBefore !== null && report.queuedBefore >= QUEUE_ALLOWANCE;
  const hasRoom =
    report.maxRunning !== null &&
    report.running + QUEUE_ALLOWANCE < report.maxRunning &&
    report.tokenUsage !== null &&
    report.tokenUsage < KV_NEARLY_EMPTY;
  if (stillQueueing && hasRoom) return previous;
  if (stillQueueing || kvFull) return Math.max(1, Math.min(ceiling, inflight - report.queued + QUEUE_ALLOWANCE));
  if (previous === 0) {
    if (slowStart) return Math.min(ceiling, Math.max(UNREAD_CAP, report.running + QUEUE_ALLOWANCE));
    return Number.isFinite(ceiling) ? ceiling : 0;
  }
  // Only a cap that held requests back, with no queue behind it, has learned something.
  if (queueing || inflight < previous) return previous;
  const step = slowStart ? previous : Math.max(1, Math.ceil(previous * GROWTH));
  return Math.min(ceiling, previous + step);
}
