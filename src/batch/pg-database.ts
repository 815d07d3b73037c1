/**
 * How every part of the PostgreSQL store (`pg-files.ts`, `pg-jobs.ts`, `pg-results.ts`) reaches the
 * database: one pool, the schema migrated before the first query (again after a failure: the
 * database may have been down), and an error of the connection rather than of the statement turned
 * into a `StoreUnavailableError` (a 503; a running job pauses until the database is back).
 */
import pg from 'pg';
import { StoreUnavailableError } from './batch-store.js';
import { migrate } from './pg-schema.js';

/** Runs one statement; what every part of the store is given. */
export type Query = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<pg.QueryResult<R>>;

/** An error from the server about the statement itself (not the connection, not a shutdown). */
function isStatementError(error: unknown): boolean {
  const { severity, code } = error as { severity?: unknown; code?: unknown };
  return typeof severity === 'string' && typeof code === 'string' && !/^(08|57P|53)/.test(code);
}

function unavailable(error: unknown): Error {
  if (isStatementError(error) || error instanceof StoreUnavailableError) return error as Error;
  return new StoreUnavailableError(
    `the batch database (batch.database_url) cannot be reached: ${(error as Error).message}`,
  );
}

export class PgDatabase {
  readonly #pool: pg.Pool;
  #ready: Promise<void> | null = null;
  #closed = false;

  constructor(url: string) {
    this.#pool = new pg.Pool({
      connectionString: url,
      max: 8,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 10_000,
      query_timeout: 30_000,
    });
    // An idle connection cut by a restart of the server: the next query takes a new one.
    this.#pool.on('error', () => {});
  }

  /** Migrates once (again after a failure: the database may have been down). */
  migrated(): Promise<void> {
    this.#ready ??= migrate(this.#pool).catch((error: unknown) => {
      this.#ready = null;
      throw unavailable(error);
    });
    return this.#ready;
  }

  readonly query: Query = async <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) => {
    await this.migrated();
    try {
      return await this.#pool.query<R>(text, values);
    } catch (error) {
      throw unavailable(error);
    }
  };

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }
}
