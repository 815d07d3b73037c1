/**
 * A job's answers in PostgreSQL: each a row of `batch_results` under the unique key (job,
 * `custom_id`), so two runners of one job (one whose lease passed, and the new holder) store each
 * answer once, and a success replaces a stored failure but nothing else replaces a row. That makes
 * an answer row safe to write without the lease fence of a job's own row (`pg-jobs.ts`). The job's
 * output and error files are read back from these rows, in the order they were stored.
 */
import type { LedgerSink } from './batch-runner.js';
import type { JobResults } from './batch-store.js';
import type { BatchOutputRecord } from './output-ledger.js';
import type { Query } from './pg-database.js';

/** Rows read per query when a job's answers are streamed out. */
const PAGE_ROWS = 2000;
/** Answers written per INSERT. */
const FLUSH_ROWS = 500;
const RETRY_MS = 500;
const NEWLINE = Buffer.from('\n');

/** A job's answers (`ok`) or failures as JSONL, in the order they were stored. */
export async function* resultLines(query: Query, batchId: string, ok: boolean): AsyncGenerator<Buffer> {
  for (let after = '0'; ; ) {
    const { rows } = await query<{ seq: string; line: Buffer }>(
      'SELECT seq, line FROM batch_results WHERE batch_id = $1 AND ok = $2 AND seq > $3 ORDER BY seq LIMIT $4',
      [batchId, ok, after, PAGE_ROWS],
    );
    if (rows.length === 0) return;
    yield Buffer.concat(rows.flatMap((row) => [row.line, NEWLINE]));
    after = (rows.at(-1) as { seq: string }).seq;
  }
}

/** The size of what `resultLines` streams. */
export async function resultBytes(query: Query, batchId: string, ok: boolean): Promise<number> {
  const { rows } = await query<{ bytes: string }>(
    'SELECT coalesce(sum(octet_length(line) + 1), 0) AS bytes FROM batch_results WHERE batch_id = $1 AND ok = $2',
    [batchId, ok],
  );
  return Number(rows[0]?.bytes ?? 0);
}

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
export class PgResults implements JobResults {
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
      const { rows } = await this.query<{ seq: string; custom_id: string }>(
        'SELECT seq, custom_id FROM batch_results WHERE batch_id = $1 AND ok AND seq > $2 ORDER BY seq LIMIT $3',
        [this.batchId, after, PAGE_ROWS * 5],
      );
      if (rows.length === 0) return;
      for (const row of rows) onAnswered(row.custom_id);
      after = (rows.at(-1) as { seq: string }).seq;
    }
  }

  async counts(): Promise<{ completed: number; failed: number }> {
    const { rows } = await this.query<{ completed: string; failed: string }>(
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
