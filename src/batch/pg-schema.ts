/**
 * The PostgreSQL store's schema, as numbered migrations: each is applied once, in order, and
 * recorded in `fleetgate_batch_schema`. Replicas starting together take turns under an advisory
 * lock, so a database is migrated once. A new table or column is a new entry at the end of
 * `MIGRATIONS`, never an edit of one already shipped.
 */
import type pg from 'pg';

/** Each entry is one schema version, applied once, in order. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE batch_files (
     id text PRIMARY KEY,
     object jsonb,
     batch_id text,
     kind text NOT NULL
   );
   CREATE TABLE batch_file_chunks (
     file_id text NOT NULL,
     seq integer NOT NULL,
     data bytea NOT NULL,
     PRIMARY KEY (file_id, seq)
   );
   CREATE TABLE batch_jobs (
     id text PRIMARY KEY,
     status text NOT NULL,
     created_at bigint NOT NULL,
     stored jsonb NOT NULL,
     lease_owner text,
     lease_expires timestamptz
   );
   CREATE INDEX batch_jobs_newest ON batch_jobs (created_at DESC, id DESC);
   CREATE TABLE batch_results (
     batch_id text NOT NULL,
     custom_id text NOT NULL,
     ok boolean NOT NULL,
     line bytea NOT NULL,
     seq bigserial NOT NULL,
     PRIMARY KEY (batch_id, custom_id)
   );
   CREATE INDEX batch_results_order ON batch_results (batch_id, seq);`,
];

/** Held while migrating: replicas starting together take turns. */
const MIGRATION_LOCK = 40_4040;

/** Brings the database reached by `pool` to the latest schema version. */
export async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS fleetgate_batch_schema (version integer NOT NULL)');
    const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM fleetgate_batch_schema');
    for (let version = (rows[0]?.v ?? 0) + 1; version <= MIGRATIONS.length; version++) {
      await client.query('BEGIN');
      await client.query(MIGRATIONS[version - 1] as string);
      await client.query('INSERT INTO fleetgate_batch_schema (version) VALUES ($1)', [version]);
      await client.query('COMMIT');
    }
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    client.release();
  } catch (error) {
    // A connection in an unknown state (a transaction or the lock held) is not reused.
    client.release(true);
    throw error;
  }
}
