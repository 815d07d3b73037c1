/**
 * The rules of a job's status, written once: which statuses have ended, which are run under a
 * lease, which a cancel stops, and which status may replace which when a job is saved. The
 * directory store applies them as they are; the PostgreSQL store renders them into its SQL
 * (`pg-jobs.ts`), so both stores keep one lifecycle and a rule changed here changes both.
 */
import { BATCH_STATUSES, type BatchStatus } from './batch-store.js';

/** A job in one of these has ended: it stays as it ended. */
const TERMINAL_STATUSES: readonly BatchStatus[] = ['completed', 'failed', 'cancelled', 'expired'];

/** Not ended: a job in one of these is run by whichever replica holds its lease. */
export const ACTIVE_STATUSES: readonly BatchStatus[] = BATCH_STATUSES.filter(
  (status) => !TERMINAL_STATUSES.includes(status),
);

/** A cancel request moves a job in one of these to `cancelling` (later, it is too late or done already). */
export const CANCELLABLE_STATUSES: readonly BatchStatus[] = ['validating', 'in_progress'];

/**
 * The statuses a job stored as `current` may be saved as: an ended job stays as it ended, and a
 * cancel (from any replica) is not undone by the runner's save of an older copy.
 */
export function replacementsOf(current: BatchStatus): readonly BatchStatus[] {
  if (TERMINAL_STATUSES.includes(current)) return [current];
  if (current === 'cancelling') return ['cancelling', 'cancelled'];
  return BATCH_STATUSES;
}

/** Whether a job stored as `current` may be saved as `next` (`replacementsOf`). */
export function mayReplace(current: BatchStatus, next: BatchStatus): boolean {
  return replacementsOf(current).includes(next);
}
