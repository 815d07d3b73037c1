/**
 * The Batch API's store in PostgreSQL (`batch.database_url`), shared by every replica: the
 * `BatchStore` of batch-store.ts composed of one part per job, over one connection pool
 * (`pg-database.ts`, the schema migrated at first use by `pg-schema.ts`): files and their bytes
 * (`pg-files.ts`), jobs and their leases (`pg-jobs.ts`), a job's answers (`pg-results.ts`). A
 * database that cannot be reached is a `StoreUnavailableError` (a 503; a running job pauses until
 * it is back).
 */
import type { Readable } from 'node:stream';
import type {
  BatchPage,
  BatchStatus,
  BatchStore,
  DeleteOutcome,
  FileObject,
  FilePurpose,
  JobResults,
  LeaseState,
  LocalInput,
  SaveOutcome,
  StoredBatch,
} from './batch-store.js';
import { PgDatabase } from './pg-database.js';
import { PgFiles } from './pg-files.js';
import { PgJobs } from './pg-jobs.js';
import { PgResults } from './pg-results.js';

export class PgStore implements BatchStore {
  readonly #database: PgDatabase;
  readonly #files: PgFiles;
  readonly #jobs: PgJobs;

  /** `cacheDir`: where a job's input is copied for its run (the copy goes when the run ends). */
  constructor(url: string, cacheDir: string) {
    this.#database = new PgDatabase(url);
    this.#files = new PgFiles(this.#database.query, cacheDir);
    this.#jobs = new PgJobs(this.#database.query);
  }

  writeContent(source: Readable): Promise<string> {
    return this.#files.writeContent(source);
  }

  removeContent(id: string): Promise<void> {
    return this.#files.removeContent(id);
  }

  readContent(id: string): Readable {
    return this.#files.readContent(id);
  }

  describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): Promise<FileObject> {
    return this.#files.describeFile(id, filename, purpose, nowSeconds);
  }

  describeResults(stored: StoredBatch, kind: 'output' | 'error', nowSeconds: number): Promise<FileObject> {
    return this.#files.describeResults(stored, kind, nowSeconds);
  }

  file(id: string): Promise<FileObject | null> {
    return this.#files.file(id);
  }

  deleteFile(id: string): Promise<DeleteOutcome> {
    return this.#files.deleteFile(id);
  }

  openInput(fileId: string): Promise<LocalInput> {
    return this.#files.openInput(fileId);
  }

  insertBatch(stored: StoredBatch): Promise<void> {
    return this.#jobs.insert(stored);
  }

  saveBatch(stored: StoredBatch, owner: string): Promise<SaveOutcome> {
    return this.#jobs.save(stored, owner);
  }

  batch(id: string): Promise<StoredBatch | null> {
    return this.#jobs.batch(id);
  }

  listBatches(limit: number, after: string | undefined): Promise<BatchPage> {
    return this.#jobs.list(limit, after);
  }

  countByStatus(): Promise<Partial<Record<BatchStatus, number>>> {
    return this.#jobs.countByStatus();
  }

  requestCancel(id: string, nowSeconds: number): Promise<StoredBatch | null> {
    return this.#jobs.requestCancel(id, nowSeconds);
  }

  claim(owner: string, leaseMs: number): Promise<StoredBatch | null> {
    return this.#jobs.claim(owner, leaseMs);
  }

  renew(id: string, owner: string, leaseMs: number): Promise<LeaseState> {
    return this.#jobs.renew(id, owner, leaseMs);
  }

  release(id: string, owner: string): Promise<void> {
    return this.#jobs.release(id, owner);
  }

  /** The owner of a job's lease and whether it is still good (tests and operators find the runner). */
  leaseOf(id: string): Promise<{ owner: string | null; live: boolean } | null> {
    return this.#jobs.leaseOf(id);
  }

  async openResults(stored: StoredBatch, signal?: AbortSignal): Promise<JobResults> {
    await this.#database.migrated();
    return new PgResults(stored.batch.id, this.#database.query, signal);
  }

  close(): Promise<void> {
    return this.#database.close();
  }
}
