/**
 * The Batch API's store under `batch.dir`, for one process: `files/<id>.jsonl` holds a file's bytes
 * and `files/<id>.json` its OpenAI File object; `batches/<id>.json` a job's Batch object and where
 * its output goes. Metadata is written to a temporary name and renamed, so a restart finds either
 * the old or the new state of a job, never half of one. A file has no File object until its bytes
 * are whole, so an upload cut short is never listed. A job's answers are its output file (the
 * ledger). Leases live in memory, since only this process runs jobs from this directory, but keep
 * the contract of the shared store: an owner and an expiry, and a save only by the live holder.
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
import { ACTIVE_STATUSES, CANCELLABLE_STATUSES, mayReplace } from './batch-status.js';
import {
  type BatchPage,
  type BatchStatus,
  type BatchStore,
  type DeleteOutcome,
  type FileObject,
  type FilePurpose,
  ID_PATTERN,
  type JobResults,
  type LeaseState,
  type LocalInput,
  newFileObject,
  newId,
  type SaveOutcome,
  type StoredBatch,
} from './batch-store.js';
import { FileResults } from './ledgered-run.js';

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

interface Lease {
  owner: string;
  /** Date.now() at which it passes. */
  expires: number;
}

export class DirStore implements BatchStore {
  readonly #files: string;
  readonly #batches: string;
  readonly #jobs = new Map<string, StoredBatch>();
  readonly #leases = new Map<string, Lease>();

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
    const file = newFileObject(id, existsSync(path) ? statSync(path).size : 0, filename, purpose, nowSeconds);
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

  async deleteFile(id: string): Promise<DeleteOutcome> {
    if ((await this.file(id)) === null) return 'missing';
    for (const { batch } of this.#jobs.values())
      if (batch.input_file_id === id && ACTIVE_STATUSES.includes(batch.status)) return 'in-use';
    rmSync(join(this.#files, `${id}.json`), { force: true });
    rmSync(this.#contentPath(id), { force: true });
    return 'deleted';
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

  async saveBatch(stored: StoredBatch, owner: string): Promise<SaveOutcome> {
    const current = this.#jobs.get(stored.batch.id);
    if (current === undefined || !this.#holds(current.batch.id, owner)) return 'lease-lost';
    if (!mayReplace(current.batch.status, stored.batch.status)) return 'status-kept';
    this.#write(stored);
    return 'saved';
  }

  #holds(id: string, owner: string): boolean {
    const lease = this.#leases.get(id);
    return lease !== undefined && lease.owner === owner && lease.expires > Date.now();
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
    if (CANCELLABLE_STATUSES.includes(stored.batch.status)) {
      stored.batch.status = 'cancelling';
      stored.batch.cancelling_at = nowSeconds;
      this.#write(stored);
    }
    return structuredClone(stored);
  }

  async claim(owner: string, leaseMs: number): Promise<StoredBatch | null> {
    const now = Date.now();
    const free = (id: string) => (this.#leases.get(id)?.expires ?? 0) <= now;
    const next = this.#newestFirst()
      .reverse()
      .find((s) => ACTIVE_STATUSES.includes(s.batch.status) && free(s.batch.id));
    if (next === undefined) return null;
    this.#leases.set(next.batch.id, { owner, expires: now + leaseMs });
    return structuredClone(next);
  }

  /** As in the shared store: the owner renews its lease even past its expiry, unless another took it. */
  async renew(id: string, owner: string, leaseMs: number): Promise<LeaseState> {
    const lease = this.#leases.get(id);
    if (lease?.owner !== owner) return 'lost';
    lease.expires = Date.now() + leaseMs;
    return this.#jobs.get(id)?.batch.status === 'cancelling' ? 'cancelling' : 'held';
  }

  async release(id: string, owner: string): Promise<void> {
    if (this.#leases.get(id)?.owner === owner) this.#leases.delete(id);
  }

  async openInput(fileId: string): Promise<LocalInput> {
    return { path: this.#contentPath(fileId), close: async () => {} };
  }

  async openResults(stored: StoredBatch): Promise<JobResults> {
    return new FileResults(this.#contentPath(stored.outputId), this.#contentPath(stored.errorsId));
  }

  async close(): Promise<void> {}
}
