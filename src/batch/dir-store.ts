/**
 * The Batch API's store under `batch.dir`, for one process: `files/<id>.jsonl` holds a file's bytes
 * and `files/<id>.json` its OpenAI File object; `batches/<id>.json` a job's Batch object and where
 * its output goes. Metadata is written to a temporary name and renamed, so a restart finds either
 * the old or the new state of a job, never half of one. A file has no File object until its bytes
 * are whole, so an upload cut short is never listed. A job's answers are its output file (the
 * ledger); leases live in memory, since only this process runs jobs from this directory.
 */
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
import {
  type BatchPage,
  type BatchStatus,
  type BatchStore,
  type FileObject,
  type FilePurpose,
  ID_PATTERN,
  type JobResults,
  type LeaseState,
  type LocalInput,
  mayReplace,
  newId,
  type StoredBatch,
} from './batch-store.js';
import { FileResults } from './ledgered-run.js';

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

const ACTIVE: ReadonlySet<BatchStatus> = new Set(['validating', 'in_progress', 'finalizing', 'cancelling']);

export class DirStore implements BatchStore {
  readonly #files: string;
  readonly #batches: string;
  readonly #jobs = new Map<string, StoredBatch>();
  readonly #leased = new Set<string>();

  constructor(dir: string) {
    this.#files = join(dir, 'files');
    this.#batches = join(dir, 'batches');
    mkdirSync(this.#files, { recursive: true });
    mkdirSync(this.#batches, { recursive: true });
    for (const name of readdirSync(this.#batches)) {
      if (!name.endsWith('.json')) continue;
      const stored = JSON.parse(readFileSync(join(this.#batches, name), 'utf8')) as StoredBatch;
      this.#jobs.set(stored.batch.id, stored);
    }
  }

  #contentPath(id: string): string {
    return join(this.#files, `${id}.jsonl`);
  }

  async writeContent(source: Readable): Promise<string> {
    const id = newId('file-');
    const path = this.#contentPath(id);
    try {
      await pipeline(source, createWriteStream(path));
    } catch (error) {
      rmSync(path, { force: true });
      throw error;
    }
    return id;
  }

  async removeContent(id: string): Promise<void> {
    if (ID_PATTERN.test(id)) rmSync(this.#contentPath(id), { force: true });
  }

  readContent(id: string): Readable {
    return createReadStream(this.#contentPath(id));
  }

  async describeFile(id: string, filename: string, purpose: FilePurpose, nowSeconds: number): Promise<FileObject> {
    const path = this.#contentPath(id);
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

  describeResults(stored: StoredBatch, kind: 'output' | 'error', nowSeconds: number): Promise<FileObject> {
    const id = kind === 'output' ? stored.outputId : stored.errorsId;
    return this.describeFile(id, `${stored.batch.id}_${kind}.jsonl`, 'batch_output', nowSeconds);
  }

  async file(id: string): Promise<FileObject | null> {
    if (!ID_PATTERN.test(id)) return null;
    const path = join(this.#files, `${id}.json`);
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as FileObject) : null;
  }

  #write(stored: StoredBatch): void {
    // A copy: the caller's object changes while it runs, the map holds what was saved.
    const copy = structuredClone(stored);
    this.#jobs.set(copy.batch.id, copy);
    writeAtomically(join(this.#batches, `${copy.batch.id}.json`), JSON.stringify(copy));
  }

  async insertBatch(stored: StoredBatch): Promise<void> {
    this.#write(stored);
  }

  async saveBatch(stored: StoredBatch): Promise<boolean> {
    const current = this.#jobs.get(stored.batch.id);
    if (current !== undefined && !mayReplace(current.batch.status, stored.batch.status)) return false;
    this.#write(stored);
    return true;
  }

  async batch(id: string): Promise<StoredBatch | null> {
    const stored = this.#jobs.get(id);
    return stored === undefined ? null : structuredClone(stored);
  }

  #newestFirst(): StoredBatch[] {
    return [...this.#jobs.values()].sort(
      (a, b) => b.batch.created_at - a.batch.created_at || (a.batch.id < b.batch.id ? 1 : -1),
    );
  }

  async listBatches(limit: number, after: string | undefined): Promise<BatchPage> {
    const all = this.#newestFirst();
    const start = after === undefined ? 0 : all.findIndex((s) => s.batch.id === after) + 1;
    return {
      data: all.slice(start, start + limit).map((s) => structuredClone(s.batch)),
      has_more: start + limit < all.length,
    };
  }

  async countByStatus(): Promise<Partial<Record<BatchStatus, number>>> {
    const counts: Partial<Record<BatchStatus, number>> = {};
    for (const { batch } of this.#jobs.values()) counts[batch.status] = (counts[batch.status] ?? 0) + 1;
    return counts;
  }

  async requestCancel(id: string, nowSeconds: number): Promise<StoredBatch | null> {
    const stored = this.#jobs.get(id);
    if (stored === undefined) return null;
    if (stored.batch.status === 'validating' || stored.batch.status === 'in_progress') {
      stored.batch.status = 'cancelling';
      stored.batch.cancelling_at = nowSeconds;
      this.#write(stored);
    }
    return structuredClone(stored);
  }

  async claim(): Promise<StoredBatch | null> {
    const next = this.#newestFirst()
      .reverse()
      .find((s) => ACTIVE.has(s.batch.status) && !this.#leased.has(s.batch.id));
    if (next === undefined) return null;
    this.#leased.add(next.batch.id);
    return structuredClone(next);
  }

  async renew(id: string): Promise<LeaseState> {
    if (!this.#leased.has(id)) return 'lost';
    return this.#jobs.get(id)?.batch.status === 'cancelling' ? 'cancelling' : 'held';
  }

  async release(id: string): Promise<void> {
    this.#leased.delete(id);
  }

  async openInput(fileId: string): Promise<LocalInput> {
    return { path: this.#contentPath(fileId), close: async () => {} };
  }

  async openResults(stored: StoredBatch): Promise<JobResults> {
    return new FileResults(this.#contentPath(stored.outputId), this.#contentPath(stored.errorsId));
  }

  async close(): Promise<void> {}
}
