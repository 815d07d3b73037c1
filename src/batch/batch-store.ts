/**
 * What the Batch API keeps, and the one interface both stores implement: `dir-store.ts` (files
 * under `batch.dir`, one process) and `pg-store.ts` (PostgreSQL, shared by every replica). A file's
 * bytes only ever pass through as streams. A job is run by whoever holds its lease (`claim`,
 * `renew`, `release`), and saved only by it (`saveBatch` is fenced by the lease); its answers go
 * to `openResults`, one per `custom_id` by construction (two runners of one job store each once).
 */
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { LedgerSink } from './batch-runner.js';

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

/** The File object of content stored under `id` (`bytes` long), described at `createdAt` (unix seconds). */
export function newFileObject(
  id: string,
  bytes: number,
  filename: string,
  purpose: FilePurpose,
  createdAt: number,
): FileObject {
  return { id, object: 'file', bytes, created_at: createdAt, filename, purpose, status: 'processed', expires_at: null };
}

export function newId(prefix: 'file-' | 'batch_'): string {
  return `${prefix}${randomBytes(12).toString('hex')}`;
}

/** A new job in `validating`, created at `createdAt` (unix seconds), with the ids of its output files. */
export function newStoredBatch(
  job: { endpoint: string; input_file_id: string; metadata: Record<string, string> | null },
  createdAt: number,
): StoredBatch {
  return {
    batch: {
      id: newId('batch_'),
      object: 'batch',
      endpoint: job.endpoint,
      errors: null,
      input_file_id: job.input_file_id,
      completion_window: '24h',
      status: 'validating',
      output_file_id: null,
      error_file_id: null,
      created_at: createdAt,
      in_progress_at: null,
      expires_at: createdAt + 24 * 3600,
      finalizing_at: null,
      completed_at: null,
      failed_at: null,
      expired_at: null,
      cancelling_at: null,
      cancelled_at: null,
      request_counts: { total: 0, completed: 0, failed: 0 },
      metadata: job.metadata,
    },
    outputId: newId('file-'),
    errorsId: newId('file-'),
  };
}

export const ID_PATTERN = /^(file-|batch_)[0-9a-f]{24}$/;

/** The store cannot be reached now (the database is down): a 503 with `message`, and a pause for a job. */
export class StoreUnavailableError extends Error {}

/** What a renewal found: the lease still ours, ours but the job was cancelled, or taken by another. */
export type LeaseState = 'held' | 'cancelling' | 'lost';

/**
 * What a runner's save of its job came to: `saved`; `status-kept`, the stored status may not be
 * replaced by the saved one (`mayReplace` in batch-status.ts: a cancel came first, or the job
 * ended); `lease-lost`, the saver no longer holds the job's lease (it expired, and maybe another
 * replica runs the job now): nothing was written, and the saver stops working on the job.
 */
export type SaveOutcome = 'saved' | 'status-kept' | 'lease-lost';

/** What `deleteFile` came to: `in-use`, the file is the input of a job not yet ended (kept). */
export type DeleteOutcome = 'deleted' | 'missing' | 'in-use';

export interface BatchPage {
  data: BatchObject[];
  has_more: boolean;
}

/** Where a job's answers go: once per `custom_id`, whoever writes them. */
export interface JobResults {
  /** Hands the `custom_id` of each answer already stored to `onAnswered`. */
  scanAnswered(onAnswered: (customId: string) => void): Promise<void>;
  readonly output: LedgerSink;
  readonly errors: LedgerSink;
  /** Answers taken but not yet stored (the runner keeps that many fewer in flight). */
  readonly unsaved: number;
  /** Completed and failed requests as stored; null when the store keeps no count of its own. */
  counts(): Promise<{ completed: number; failed: number } | null>;
  /** Stores what is pending and closes. */
  close(): Promise<void>;
}

/** An input file as a local path, for the two reads of a run. */
export interface LocalInput {
  readonly path: string;
  close(): Promise<void>;
}

export interface BatchStore {
  /** The bytes of a new file, streamed in; its id (no File object yet: `describeFile`). */
  writeContent(source: Readable): Promise<string>;
  /** Drops the bytes of a file that got no File object (an upload refused once read). */
  removeContent(id: string): Promise<void>;
  /** A described file's bytes (an upload, or a job's output or error file), as a stream. */
  readContent(id: string): Readable;
  /** Writes the File object of content already stored under `id`. */
  describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): Promise<FileObject>;
  /** Describes a job's output or error file, made of its stored answers. */
  describeResults(stored: StoredBatch, kind: 'output' | 'error', nowSeconds: number): Promise<FileObject>;
  file(id: string): Promise<FileObject | null>;
  /** Removes a described file, its object and bytes, unless a job not yet ended reads it. */
  deleteFile(id: string): Promise<DeleteOutcome>;
  insertBatch(stored: StoredBatch): Promise<void>;
  /** Saves `stored` if `owner` holds its lease, unexpired, and `mayReplace` allows its status. */
  saveBatch(stored: StoredBatch, owner: string): Promise<SaveOutcome>;
  batch(id: string): Promise<StoredBatch | null>;
  /** Newest first, after the job `after`. */
  listBatches(limit: number, after: string | undefined): Promise<BatchPage>;
  countByStatus(): Promise<Partial<Record<BatchStatus, number>>>;
  /** A validating or in-progress job becomes `cancelling`; the job as it is after. */
  requestCancel(id: string, nowSeconds: number): Promise<StoredBatch | null>;
  /** A job to run (active, its lease free or expired), leased to `owner` for `leaseMs`; null: none. */
  claim(owner: string, leaseMs: number): Promise<StoredBatch | null>;
  renew(id: string, owner: string, leaseMs: number): Promise<LeaseState>;
  release(id: string, owner: string): Promise<void>;
  openInput(fileId: string): Promise<LocalInput>;
  /** `signal` aborted: answers the store cannot take now may be dropped at close (a later run sends them again). */
  openResults(stored: StoredBatch, signal?: AbortSignal): Promise<JobResults>;
  close(): Promise<void>;
}
