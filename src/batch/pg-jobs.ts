/**
 * Jobs in PostgreSQL: one `batch_jobs` row each (the stored job as JSON, its status in a column of
 * its own, and its lease: owner and expiry), shared by every replica. The status rules are not
 * written here: the `IN (...)` lists and the `CASE` of which status may replace which are rendered
 * from batch-status.ts. A runner's save is fenced by its lease: it lands only while the saver holds
 * the lease, unexpired, so a replica whose lease passed (the job maybe run by another now) cannot
 * overwrite the job; it is told `lease-lost` and stops.
 */
import { ACTIVE_STATUSES, CANCELLABLE_STATUSES, replacementsOf } from './batch-status.js';
import {
  BATCH_STATUSES,
  type BatchPage,
  type BatchStatus,
  type LeaseState,
  type SaveOutcome,
  type StoredBatch,
} from './batch-store.js';
import type { Query } from './pg-database.js';

/** A status as an SQL literal (statuses are lowercase words: nothing to escape, checked anyway). */
function sqlStatus(status: BatchStatus): string {
  if (!/^[a-z_]+$/.test(status)) throw new Error(`not a status: ${status}`);
  return `'${status}'`;
}

/** Statuses as the list of an SQL `IN`. */
function sqlStatuses(statuses: readonly BatchStatus[]): string {
  return `(${statuses.map(sqlStatus).join(', ')})`;
}

/** `mayReplace` as SQL: true when the row's `status` may be saved as the status in `next` (an SQL expression). */
function mayReplaceSql(next: string): string {
  const arms = BATCH_STATUSES.map(
    (current) => `WHEN ${sqlStatus(current)} THEN ${next} IN ${sqlStatuses(replacementsOf(current))}`,
  );
  return `CASE status ${arms.join(' ')} ELSE false END`;
}

/** The row's lease is held by the owner in `owner` (an SQL expression) and has not passed. */
const leaseHeldSql = (owner: string) => `(lease_owner = ${owner} AND lease_expires > now())`;

const SAVE_SQL = `UPDATE batch_jobs SET stored = $2, status = $3
  WHERE id = $1 AND ${leaseHeldSql('$4')} AND ${mayReplaceSql('$3')}`;
const LEASE_HELD_SQL = `SELECT ${leaseHeldSql('$2')} AS held FROM batch_jobs WHERE id = $1`;
const CANCEL_SQL = `UPDATE batch_jobs SET status = 'cancelling',
    stored = jsonb_set(jsonb_set(stored, '{batch,status}', '"cancelling"'), '{batch,cancelling_at}', to_jsonb($2::bigint))
  WHERE id = $1 AND status IN ${sqlStatuses(CANCELLABLE_STATUSES)} RETURNING stored`;
/** The oldest active job whose lease is free or passed, locked so that concurrent claims skip it. */
const CLAIM_SQL = `UPDATE batch_jobs SET lease_owner = $1, lease_expires = now() + $2 * interval '1 millisecond'
  WHERE id = (SELECT id FROM batch_jobs WHERE status IN ${sqlStatuses(ACTIVE_STATUSES)}
                AND (lease_owner IS NULL OR lease_expires < now())
              ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING stored`;

export class PgJobs {
  constructor(readonly query: Query) {}

  async insert(stored: StoredBatch): Promise<void> {
    await this.query('INSERT INTO batch_jobs (id, status, created_at, stored) VALUES ($1, $2, $3, $4)', [
      stored.batch.id,
      stored.batch.status,
      stored.batch.created_at,
      JSON.stringify(stored),
    ]);
  }

  /** In one statement, so a cancel from another replica or a takeover of the lease is not lost. */
  async save(stored: StoredBatch, owner: string): Promise<SaveOutcome> {
    const { id, status } = stored.batch;
    const { rowCount } = await this.query(SAVE_SQL, [id, JSON.stringify(stored), status, owner]);
    if ((rowCount ?? 0) > 0) return 'saved';
    // Refused: which rule refused it (a job gone has no lease either).
    const { rows } = await this.query<{ held: boolean }>(LEASE_HELD_SQL, [id, owner]);
    return rows[0]?.held === true ? 'status-kept' : 'lease-lost';
  }

  async batch(id: string): Promise<StoredBatch | null> {
    const { rows } = await this.query<{ stored: StoredBatch }>('SELECT stored FROM batch_jobs WHERE id = $1', [id]);
    return rows[0]?.stored ?? null;
  }

  async list(limit: number, after: string | undefined): Promise<BatchPage> {
    const { rows } =
      after === undefined
        ? await this.query<{ stored: StoredBatch }>(
            'SELECT stored FROM batch_jobs ORDER BY created_at DESC, id DESC LIMIT $1',
            [limit + 1],
          )
        : await this.query<{ stored: StoredBatch }>(
            `SELECT j.stored FROM batch_jobs j, batch_jobs a WHERE a.id = $2
               AND (j.created_at, j.id) < (a.created_at, a.id) ORDER BY j.created_at DESC, j.id DESC LIMIT $1`,
            [limit + 1, after],
          );
    return { data: rows.slice(0, limit).map((row) => row.stored.batch), has_more: rows.length > limit };
  }

  async countByStatus(): Promise<Partial<Record<BatchStatus, number>>> {
    const { rows } = await this.query<{ status: BatchStatus; n: string }>(
      'SELECT status, count(*) AS n FROM batch_jobs GROUP BY status',
    );
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
  }

  async requestCancel(id: string, nowSeconds: number): Promise<StoredBatch | null> {
    const { rows } = await this.query<{ stored: StoredBatch }>(CANCEL_SQL, [id, nowSeconds]);
    return rows[0]?.stored ?? this.batch(id);
  }

  async claim(owner: string, leaseMs: number): Promise<StoredBatch | null> {
    const { rows } = await this.query<{ stored: StoredBatch }>(CLAIM_SQL, [owner, leaseMs]);
    return rows[0]?.stored ?? null;
  }

  /** The owner renews its lease even past its expiry, unless another replica took it meanwhile. */
  async renew(id: string, owner: string, leaseMs: number): Promise<LeaseState> {
    const { rows } = await this.query<{ status: BatchStatus }>(
      `UPDATE batch_jobs SET lease_expires = now() + $3 * interval '1 millisecond'
       WHERE id = $1 AND lease_owner = $2 RETURNING status`,
      [id, owner, leaseMs],
    );
    const status = rows[0]?.status;
    if (status === undefined) return 'lost';
    return status === 'cancelling' ? 'cancelling' : 'held';
  }

  async release(id: string, owner: string): Promise<void> {
    await this.query(
      'UPDATE batch_jobs SET lease_owner = NULL, lease_expires = NULL WHERE id = $1 AND lease_owner = $2',
      [id, owner],
    );
  }

  /** The owner of a job's lease and whether it is still good (tests and operators find the runner). */
  async leaseOf(id: string): Promise<{ owner: string | null; live: boolean } | null> {
    const { rows } = await this.query<{ owner: string | null; live: boolean }>(
      'SELECT lease_owner AS owner, coalesce(lease_expires > now(), false) AS live FROM batch_jobs WHERE id = $1',
      [id],
    );
    return rows[0] ?? null;
  }
}
