/**
 * The Batch API's storage under `batch.dir`: `files/<id>.jsonl` holds a file's bytes and
 * `files/<id>.json` its OpenAI File object; `batches/<id>.json` a job's Batch object and where its
 * output goes. Metadata is written to a temporary name and renamed, so a restart finds either the
 * old or the new state of a job, never half of one. A file's bytes only ever pass through as
 * streams (`writeContent`, `readContent`; a job's run reads and appends at `contentPath`): a file
 * of GBs costs no memory. A file has no File object until its bytes are whole, so an upload cut
 * short is never listed.
 */
import { randomBytes } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export type FilePurpose = 'batch' | 'batch_output';

/** OpenAI's File object. */
export interface FileObject {
  id: string;
  object: 'file';
  bytes: number;
  created_at: number;
  filename: string;
  purpose: FilePurpose;
  status: 'processed';
  expires_at: number | null;
}

export type BatchStatus =
  | 'validating'
  | 'failed'
  | 'in_progress'
  | 'finalizing'
  | 'completed'
  | 'expired'
  | 'cancelling'
  | 'cancelled';

export const BATCH_STATUSES: readonly BatchStatus[] = [
  'validating',
  'failed',
  'in_progress',
  'finalizing',
  'completed',
  'expired',
  'cancelling',
  'cancelled',
];

/** OpenAI's Batch object. */
export interface BatchObject {
  id: string;
  object: 'batch';
  endpoint: string;
  errors: {
    object: 'list';
    data: Array<{ code: string; message: string; line: number | null; param: string | null }>;
  } | null;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number | null;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  request_counts: { total: number; completed: number; failed: number };
  metadata: Record<string, string> | null;
}

/** What is stored for a job: the Batch object and the file ids its run writes to. */
export interface StoredBatch {
  batch: BatchObject;
  outputId: string;
  errorsId: string;
}

export function newId(prefix: 'file-' | 'batch_'): string {
  return `${prefix}${randomBytes(12).toString('hex')}`;
}

const ID_PATTERN = /^(file-|batch_)[0-9a-f]{24}$/;

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

export class BatchStore {
  readonly #files: string;
  readonly #batches: string;

  constructor(dir: string) {
    this.#files = join(dir, 'files');
    this.#batches = join(dir, 'batches');
    mkdirSync(this.#files, { recursive: true });
    mkdirSync(this.#batches, { recursive: true });
  }

  /** Where a file's bytes are; null for an id that is not one of ours. */
  contentPath(id: string): string | null {
    return ID_PATTERN.test(id) ? join(this.#files, `${id}.jsonl`) : null;
  }

  /** The bytes of a new file, streamed from `source` to disk; its id (no File object yet: `describeFile`). */
  async writeContent(source: Readable): Promise<string> {
    const id = newId('file-');
    const path = join(this.#files, `${id}.jsonl`);
    try {
      await pipeline(source, createWriteStream(path));
    } catch (error) {
      rmSync(path, { force: true });
      throw error;
    }
    return id;
  }

  /** Drops the bytes of a file that got no File object (an upload refused once read). */
  removeContent(id: string): void {
    const path = this.contentPath(id);
    if (path !== null) rmSync(path, { force: true });
  }

  /** A file's bytes, as a stream. */
  readContent(id: string): Readable {
    return createReadStream(join(this.#files, `${id}.jsonl`));
  }

  /** Writes the File object of content already at `contentPath(id)`. */
  describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): FileObject {
    const path = join(this.#files, `${id}.jsonl`);
    const file: FileObject = {
      id,
      object: 'file',
      bytes: existsSync(path) ? statSync(path).size : 0,
      created_at: nowSeconds,
      filename,
      purpose,
      status: 'processed',
      expires_at: null,
    };
    writeAtomically(join(this.#files, `${id}.json`), JSON.stringify(file));
    return file;
  }

  file(id: string): FileObject | null {
    if (!ID_PATTERN.test(id)) return null;
    const path = join(this.#files, `${id}.json`);
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as FileObject) : null;
  }

  saveBatch(stored: StoredBatch): void {
    writeAtomically(join(this.#batches, `${stored.batch.id}.json`), JSON.stringify(stored));
  }

  /** Every stored job, newest first. */
  loadBatches(): StoredBatch[] {
    return readdirSync(this.#batches)
      .filter((name) => name.endsWith('.json'))
      .map((name) => JSON.parse(readFileSync(join(this.#batches, name), 'utf8')) as StoredBatch)
      .sort((a, b) => b.batch.created_at - a.batch.created_at || (a.batch.id < b.batch.id ? 1 : -1));
  }
}
