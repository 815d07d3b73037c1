/**
 * The Batch API's store in PostgreSQL (`batch.database_url`), shared by every replica: a file's
 * bytes in 1 MiB rows (streamed in and out, never whole in memory), jobs as rows with a lease
 * (owner, expiry) that one replica holds while it runs the job, and each answer a row under the
 * unique key (job, `custom_id`): two runners of one job store each answer once. Output and error
 * files are read from those rows when downloaded. The schema is migrated at first use under an
 * advisory lock, so replicas starting together migrate once. A database that cannot be reached is a
 * `StoreUnavailableError` (a 503; a running job pauses until it is back).
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import type { LedgerSink } from './batch-runner.js';
import {
  type BatchPage,
  type BatchStatus,
  type BatchStore,
  type FileObject,
  type FilePurpose,
  type JobResults,
  type LeaseState,
  type LocalInput,
  newId,
  type StoredBatch,
  StoreUnavailableError,
} from './batch-store.js';
import type { BatchOutputRecord } from './output-ledger.js';

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
const CHUNK_BYTES = 1 << 20;
/** Rows read per query when a file or a job's answers are streamed out. */
const PAGE_ROWS = 2000;
/** Answers written per INSERT. */
const FLUSH_ROWS = 500;
const RETRY_MS = 500;

const ACTIVE_SQL = `('validating', 'in_progress', 'finalizing', 'cancelling')`;
const TERMINAL_SQL = `('completed', 'failed', 'cancelled', 'expired')`;

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

export class PgStore implements BatchStore {
  readonly #pool: pg.Pool;
  readonly #cacheDir: string;
  #ready: Promise<void> | null = null;
  #closed = false;

  /** `cacheDir`: where a job's input is copied for its run (the copy goes when the run ends). */
  constructor(url: string, cacheDir: string) {
    this.#pool = new pg.Pool({
      connectionString: url,
      max: 8,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 10_000,
      query_timeout: 30_000,
    });
    // An idle connection cut by a restart of the server: the next query takes a new one.
    this.#pool.on('error', () => {});
    this.#cacheDir = cacheDir;
  }

  /** Migrates once (again after a failure: the database may have been down). */
  #migrated(): Promise<void> {
    this.#ready ??= this.#migrate().catch((error: unknown) => {
      this.#ready = null;
      throw unavailable(error);
    });
    return this.#ready;
  }

  async #migrate(): Promise<void> {
    const client = await this.#pool.connect();
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

  async #query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    await this.#migrated();
    try {
      return await this.#pool.query<R>(text, values);
    } catch (error) {
      throw unavailable(error);
    }
  }

  async writeContent(source: Readable): Promise<string> {
    const id = newId('file-');
    await this.#query(`INSERT INTO batch_files (id, kind) VALUES ($1, 'upload')`, [id]);
    try {
      let seq = 0;
      let parts: Buffer[] = [];
      let size = 0;
      const put = async () => {
        await this.#query('INSERT INTO batch_file_chunks (file_id, seq, data) VALUES ($1, $2, $3)', [
          id,
          seq++,
          Buffer.concat(parts),
        ]);
        parts = [];
        size = 0;
      };
      for await (const chunk of source as AsyncIterable<Buffer>) {
        parts.push(chunk);
        size += chunk.length;
        if (size >= CHUNK_BYTES) await put();
      }
      if (size > 0) await put();
    } catch (error) {
      await this.removeContent(id).catch(() => {});
      throw error;
    }
    return id;
  }

  async removeContent(id: string): Promise<void> {
    await this.#query('DELETE FROM batch_file_chunks WHERE file_id = $1', [id]);
    await this.#query('DELETE FROM batch_files WHERE id = $1 AND object IS NULL', [id]);
  }

  readContent(id: string): Readable {
    return Readable.from(this.#content(id), { objectMode: false });
  }

  async *#content(id: string): AsyncGenerator<Buffer> {
    const { rows } = await this.#query<{ kind: string; batch_id: string | null }>(
      'SELECT kind, batch_id FROM batch_files WHERE id = $1',
      [id],
    );
    const file = rows[0];
    if (file === undefined) return;
    if (file.kind === 'upload') yield* this.#chunks(id);
    else yield* this.#resultLines(file.batch_id as string, file.kind === 'output');
  }

  async *#chunks(id: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const { rows } = await this.#query<{ data: Buffer }>(
        'SELECT data FROM batch_file_chunks WHERE file_id = $1 AND seq = $2',
        [id, seq],
      );
      if (rows[0] === undefined) return;
      yield rows[0].data;
    }
  }

  /** A job's answers (or failures) as JSONL, in the order they were stored. */
  async *#resultLines(batchId: string, ok: boolean): AsyncGenerator<Buffer> {
    for (let after = '0'; ; ) {
      const { rows } = await this.#query<{ seq: string; line: Buffer }>(
        'SELECT seq, line FROM batch_results WHERE batch_id = $1 AND ok = $2 AND seq > $3 ORDER BY seq LIMIT $4',
        [batchId, ok, after, PAGE_ROWS],
      );
      if (rows.length === 0) return;
      yield Buffer.concat(rows.flatMap((row) => [row.line, NEWLINE]));
      after = (rows.at(-1) as { seq: string }).seq;
    }
  }

  async #describe(file: FileObject, batchId: string | null, kind: string): Promise<FileObject> {
    await this.#query(
      `INSERT INTO batch_files (id, object, batch_id, kind) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET object = EXCLUDED.object`,
      [file.id, JSON.stringify(file), batchId, kind],
    );
    return file;
  }

  async describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): Promise<FileObject> {
    const { rows } = await this.#query<{ bytes: string }>(
      'SELECT coalesce(sum(octet_length(data)), 0) AS bytes FROM batch_file_chunks WHERE file_id = $1',
      [id],
    );
    return this.#describe(fileObject(id, Number(rows[0]?.bytes ?? 0), filename, purpose, nowSeconds), null, 'upload');
  }

  async describeResults(stored: StoredBatch, kind: 'output' | 'error', nowSeconds: number): Promise<FileObject> {
    const { rows } = await this.#query<{ bytes: string }>(
      'SELECT coalesce(sum(octet_length(line) + 1), 0) AS bytes FROM batch_results WHERE batch_id = $1 AND ok = $2',
      [stored.batch.id, kind === 'output'],
    );
    const id = kind === 'output' ? stored.outputId : stored.errorsId;
    const name = `${stored.batch.id}_${kind}.jsonl`;
    const file = fileObject(id, Number(rows[0]?.bytes ?? 0), name, 'batch_output', nowSeconds);
    return this.#describe(file, stored.batch.id, kind);
  }

  async file(id: string): Promise<FileObject | null> {
    const { rows } = await this.#query<{ object: FileObject }>(
      'SELECT object FROM batch_files WHERE id = $1 AND object IS NOT NULL',
      [id],
    );
    return rows[0]?.object ?? null;
  }

  async insertBatch(stored: StoredBatch): Promise<void> {
    await this.#query('INSERT INTO batch_jobs (id, status, created_at, stored) VALUES ($1, $2, $3, $4)', [
      stored.batch.id,
      stored.batch.status,
      stored.batch.created_at,
      JSON.stringify(stored),
    ]);
  }

  async saveBatch(stored: StoredBatch): Promise<boolean> {
    // mayReplace (batch-store.ts), in one statement: a cancel from another replica is not lost.
    const { rowCount } = await this.#query(
      `UPDATE batch_jobs SET stored = $2, status = $3 WHERE id = $1 AND (status = $3 OR
         (status NOT IN ${TERMINAL_SQL} AND (status <> 'cancelling' OR $3 = 'cancelled')))`,
      [stored.batch.id, JSON.stringify(stored), stored.batch.status],
    );
    return (rowCount ?? 0) > 0;
  }

  async batch(id: string): Promise<StoredBatch | null> {
    const { rows } = await this.#query<{ stored: StoredBatch }>('SELECT stored FROM batch_jobs WHERE id = $1', [id]);
    return rows[0]?.stored ?? null;
  }

  async listBatches(limit: number, after: string | undefined): Promise<BatchPage> {
    const { rows } =
      after === undefined
        ? await this.#query<{ stored: StoredBatch }>(
            'SELECT stored FROM batch_jobs ORDER BY created_at DESC, id DESC LIMIT $1',
            [limit + 1],
          )
        : await this.#query<{ stored: StoredBatch }>(
            `SELECT j.stored FROM batch_jobs j, batch_jobs a WHERE a.id = $2
               AND (j.created_at, j.id) < (a.created_at, a.id) ORDER BY j.created_at DESC, j.id DESC LIMIT $1`,
            [limit + 1, after],
          );
    return { data: rows.slice(0, limit).map((row) => row.stored.batch), has_more: rows.length > limit };
  }

  async countByStatus(): Promise<Partial<Record<BatchStatus, number>>> {
    const { rows } = await this.#query<{ status: BatchStatus; n: string }>(
      'SELECT status, count(*) AS n FROM batch_jobs GROUP BY status',
    );
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
  }

  async requestCancel(id: string, nowSeconds: number): Promise<StoredBatch | null> {
    const { rows } = await this.#query<{ stored: StoredBatch }>(
      `UPDATE batch_jobs SET status = 'cancelling',
         stored = jsonb_set(jsonb_set(stored, '{batch,status}', '"cancelling"'), '{batch,cancelling_at}', to_jsonb($2::bigint))
       WHERE id = $1 AND status IN ('validating', 'in_progress') RETURNING stored`,
      [id, nowSeconds],
    );
    return rows[0]?.stored ?? this.batch(id);
  }

  async claim(owner: string, leaseMs: number): Promise<StoredBatch | null> {
    const { rows } = await this.#query<{ stored: StoredBatch }>(
      `UPDATE batch_jobs SET lease_owner = $1, lease_expires = now() + $2 * interval '1 millisecond'
       WHERE id = (SELECT id FROM batch_jobs WHERE status IN ${ACTIVE_SQL}
                     AND (lease_owner IS NULL OR lease_expires < now())
                   ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING stored`,
      [owner, leaseMs],
    );
    return rows[0]?.stored ?? null;
  }

  async renew(id: string, owner: string, leaseMs: number): Promise<LeaseState> {
    const { rows } = await this.#query<{ status: BatchStatus }>(
      `UPDATE batch_jobs SET lease_expires = now() + $3 * interval '1 millisecond'
       WHERE id = $1 AND lease_owner = $2 RETURNING status`,
      [id, owner, leaseMs],
    );
    const status = rows[0]?.status;
    if (status === undefined) return 'lost';
    return status === 'cancelling' ? 'cancelling' : 'held';
  }

  async release(id: string, owner: string): Promise<void> {
    await this.#query(
      'UPDATE batch_jobs SET lease_owner = NULL, lease_expires = NULL WHERE id = $1 AND lease_owner = $2',
      [id, owner],
    );
  }

  /** The owner of a job's lease and whether it is still good (tests and operators find the runner). */
  async leaseOf(id: string): Promise<{ owner: string | null; live: boolean } | null> {
    const { rows } = await this.#query<{ owner: string | null; live: boolean }>(
      'SELECT lease_owner AS owner, coalesce(lease_expires > now(), false) AS live FROM batch_jobs WHERE id = $1',
      [id],
    );
    return rows[0] ?? null;
  }

  async openInput(fileId: string): Promise<LocalInput> {
    mkdirSync(this.#cacheDir, { recursive: true });
    const path = join(this.#cacheDir, `${fileId}.${randomBytes(4).toString('hex')}.jsonl`);
    try {
      await pipeline(Readable.from(this.#chunks(fileId)), createWriteStream(path));
    } catch (error) {
      rmSync(path, { force: true });
      throw error;
    }
    return { path, close: async () => rmSync(path, { force: true }) };
  }

  async openResults(stored: StoredBatch, signal?: AbortSignal): Promise<JobResults> {
    await this.#migrated();
    return new PgResults(stored.batch.id, (text, values) => this.#query(text, values), signal);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }
}

const NEWLINE = Buffer.from('\n');

function fileObject(id: string, bytes: number, filename: string, purpose: FilePurpose, now: number): FileObject {
  return { id, object: 'file', bytes, created_at: now, filename, purpose, status: 'processed', expires_at: null };
}

type Query = (text: string, values: unknown[]) => Promise<pg.QueryResult>;

interface Row {
  customId: string;
  ok: boolean;
  line: Buffer;
}

/**
 * A job's answers as rows: appended in memory and stored in the background, a few hundred per
 * INSERT. While the database cannot be reached, `unsaved` holds the runner (nothing new is sent);
 * the rows wait and are stored once it is back.
 */
class PgResults implements JobResults {
  readonly output: LedgerSink;
  readonly errors: LedgerSink;
  #pending: Row[] = [];
  #flushing: Promise<void> | null = null;
  #down = false;

  constructor(
    readonly batchId: string,
    readonly query: Query,
    readonly signal?: AbortSignal,
  ) {
    this.output = { append: (record) => this.#append(record, true) };
    this.errors = { append: (record) => this.#append(record, false) };
  }

  get unsaved(): number {
    return this.#down ? Number.MAX_SAFE_INTEGER : this.#pending.length;
  }

  #append(record: BatchOutputRecord, ok: boolean): void {
    this.#pending.push({ customId: record.custom_id, ok, line: Buffer.from(JSON.stringify(record)) });
    this.#flushing ??= this.#flush().finally(() => {
      this.#flushing = null;
    });
  }

  async #flush(): Promise<void> {
    while (this.#pending.length > 0) {
      const rows = this.#pending.slice(0, FLUSH_ROWS);
      try {
        await this.#insert(rows);
        this.#down = false;
        this.#pending = this.#pending.slice(rows.length);
      } catch {
        this.#down = true;
        if (this.signal?.aborted) {
          this.#pending = [];
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  /** A success replaces a stored failure (a retry that passed); nothing else replaces a stored row. */
  #insert(rows: Row[]): Promise<unknown> {
    const unique = new Map<string, Row>();
    for (const row of rows) if (row.ok || !unique.has(row.customId)) unique.set(row.customId, row);
    const all = [...unique.values()];
    return this.query(
      `INSERT INTO batch_results (batch_id, custom_id, ok, line)
       SELECT $1, * FROM unnest($2::text[], $3::boolean[], $4::bytea[])
       ON CONFLICT (batch_id, custom_id) DO UPDATE SET ok = true, line = EXCLUDED.line
       WHERE EXCLUDED.ok AND NOT batch_results.ok`,
      [this.batchId, all.map((r) => r.customId), all.map((r) => r.ok), all.map((r) => r.line)],
    );
  }

  async scanAnswered(onAnswered: (customId: string) => void): Promise<void> {
    for (let after = '0'; ; ) {
      const { rows } = await this.query(
        'SELECT seq, custom_id FROM batch_results WHERE batch_id = $1 AND ok AND seq > $2 ORDER BY seq LIMIT $3',
        [this.batchId, after, PAGE_ROWS * 5],
      );
      if (rows.length === 0) return;
      for (const row of rows as Array<{ custom_id: string }>) onAnswered(row.custom_id);
      after = (rows.at(-1) as { seq: string }).seq;
    }
  }

  async counts(): Promise<{ completed: number; failed: number }> {
    const { rows } = await this.query(
      `SELECT count(*) FILTER (WHERE ok) AS completed, count(*) FILTER (WHERE NOT ok) AS failed
       FROM batch_results WHERE batch_id = $1`,
      [this.batchId],
    );
    const row = rows[0] as { completed: string; failed: string };
    return { completed: Number(row.completed), failed: Number(row.failed) };
  }

  /** Waits until every answer is stored. */
  async close(): Promise<void> {
    while (this.#flushing !== null) await this.#flushing;
  }
}
