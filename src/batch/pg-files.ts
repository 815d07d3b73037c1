/**
 * Files in PostgreSQL: an upload's bytes in 1 MiB rows of `batch_file_chunks`, streamed in and out
 * (never whole in memory), and each file's OpenAI File object in `batch_files`. A job's output and
 * error files have no bytes of their own: they are read from its answers (`pg-results.ts`) when
 * downloaded. A run reads its input from a local copy, made here and removed when the run ends.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ACTIVE_STATUSES } from './batch-status.js';
import {
  type DeleteOutcome,
  type FileObject,
  type FilePurpose,
  type LocalInput,
  newFileObject,
  newId,
  type StoredBatch,
} from './batch-store.js';
import type { Query } from './pg-database.js';
import { resultBytes, resultLines } from './pg-results.js';

const CHUNK_BYTES = 1 << 20;

/** What a `batch_files` row holds: an upload's chunks, or a job's answers or failures. */
type FileKind = 'upload' | 'output' | 'error';

export class PgFiles {
  /** `cacheDir`: where a job's input is copied for its run. */
  constructor(
    readonly query: Query,
    readonly cacheDir: string,
  ) {}

  async writeContent(source: Readable): Promise<string> {
    const id = newId('file-');
    await this.query(`INSERT INTO batch_files (id, kind) VALUES ($1, 'upload')`, [id]);
    try {
      let seq = 0;
      let parts: Buffer[] = [];
      let size = 0;
      const put = async () => {
        await this.query('INSERT INTO batch_file_chunks (file_id, seq, data) VALUES ($1, $2, $3)', [
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
    await this.query('DELETE FROM batch_file_chunks WHERE file_id = $1', [id]);
    await this.query('DELETE FROM batch_files WHERE id = $1 AND object IS NULL', [id]);
  }

  readContent(id: string): Readable {
    return Readable.from(this.#content(id), { objectMode: false });
  }

  async *#content(id: string): AsyncGenerator<Buffer> {
    const { rows } = await this.query<{ kind: FileKind; batch_id: string | null }>(
      'SELECT kind, batch_id FROM batch_files WHERE id = $1',
      [id],
    );
    const file = rows[0];
    if (file === undefined) return;
    if (file.kind === 'upload') yield* this.#chunks(id);
    else yield* resultLines(this.query, file.batch_id as string, file.kind === 'output');
  }

  async *#chunks(id: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const { rows } = await this.query<{ data: Buffer }>(
        'SELECT data FROM batch_file_chunks WHERE file_id = $1 AND seq = $2',
        [id, seq],
      );
      if (rows[0] === undefined) return;
      yield rows[0].data;
    }
  }

  async #describe(file: FileObject, batchId: string | null, kind: FileKind): Promise<FileObject> {
    await this.query(
      `INSERT INTO batch_files (id, object, batch_id, kind) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET object = EXCLUDED.object`,
      [file.id, JSON.stringify(file), batchId, kind],
    );
    return file;
  }

  async describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): Promise<FileObject> {
    const { rows } = await this.query<{ bytes: string }>(
      'SELECT coalesce(sum(octet_length(data)), 0) AS bytes FROM batch_file_chunks WHERE file_id = $1',
      [id],
    );
    return this.#describe(
      newFileObject(id, Number(rows[0]?.bytes ?? 0), filename, purpose, nowSeconds),
      null,
      'upload',
    );
  }

  async describeResults(stored: StoredBatch, kind: 'output' | 'error', nowSeconds: number): Promise<FileObject> {
    const bytes = await resultBytes(this.query, stored.batch.id, kind === 'output');
    const id = kind === 'output' ? stored.outputId : stored.errorsId;
    const file = newFileObject(id, bytes, `${stored.batch.id}_${kind}.jsonl`, 'batch_output', nowSeconds);
    return this.#describe(file, stored.batch.id, kind);
  }

  async file(id: string): Promise<FileObject | null> {
    const { rows } = await this.query<{ object: FileObject }>(
      'SELECT object FROM batch_files WHERE id = $1 AND object IS NOT NULL',
      [id],
    );
    return rows[0]?.object ?? null;
  }

  /**
   * Removes a described file's row and chunks, unless a job not yet ended has it as its input (a
   * job's output and error files are read from its answers, which stay with the job).
   */
  async deleteFile(id: string): Promise<DeleteOutcome> {
    if ((await this.file(id)) === null) return 'missing';
    const { rows } = await this.query<{ id: string }>(
      `DELETE FROM batch_files WHERE id = $1 AND object IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM batch_jobs WHERE stored->'batch'->>'input_file_id' = $1 AND status = ANY($2::text[])
       ) RETURNING id`,
      [id, ACTIVE_STATUSES],
    );
    if (rows.length === 0) return (await this.file(id)) === null ? 'missing' : 'in-use';
    await this.query('DELETE FROM batch_file_chunks WHERE file_id = $1', [id]);
    return 'deleted';
  }

  /** A local copy of an upload, for the two reads of a run; removed at its `close`. */
  async openInput(fileId: string): Promise<LocalInput> {
    mkdirSync(this.cacheDir, { recursive: true });
    const path = join(this.cacheDir, `${fileId}.${randomBytes(4).toString('hex')}.jsonl`);
    try {
      await pipeline(Readable.from(this.#chunks(fileId)), createWriteStream(path));
    } catch (error) {
      rmSync(path, { force: true });
      throw error;
    }
    return { path, close: async () => rmSync(path, { force: true }) };
  }
}
