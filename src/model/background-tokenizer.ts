/**
 * Tokenizing off the event loop: a worker thread holding its own copy of a model's tokenizer
 * (token-worker.ts). A ~1 KB chat message costs ~0.3 ms of CPU to tokenize with the pure-JavaScript
 * tokenizer, a 6 KB first prompt ~3 ms: on the event loop that delays every other request's bytes.
 * Requests for the same text while it is being tokenized share one answer; past `MAX_BACKLOG` texts
 * queued, more are refused at once (`TokenizerBusy`) rather than queued behind. The worker is unref'd
 * (it never keeps a process alive) and costs a second tokenizer's memory (~100 MB for Qwen3).
 */
import { Worker } from 'node:worker_threads';

/** Texts queued at most: past it a request is not tokenized (it is routed without its keys). */
const MAX_BACKLOG = 256;

/** The worker has `MAX_BACKLOG` texts queued already. */
export class TokenizerBusy extends Error {}

interface Answer {
  readonly id: number;
  readonly ids?: Uint32Array;
  readonly error?: string;
}

interface Pending {
  readonly resolve: (ids: Uint32Array) => void;
  readonly reject: (err: Error) => void;
}

/** The worker's entry; under tsx (tests, benches) a TypeScript one, loaded through tsx's hooks. */
function startWorker(dir: string): Worker {
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./token-worker.js', import.meta.url), { workerData: { dir } });
  const entry = new URL('./token-worker.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(code, { eval: true, workerData: { dir } });
}

export class BackgroundTokenizer {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  readonly #byText = new Map<string, Promise<Uint32Array>>();
  #nextId = 0;
  #failure: Error | null = null;
  /** Settles once the worker has loaded its model (or failed to): the first text it answers. */
  readonly loaded: Promise<void>;

  constructor(dir: string) {
    this.#worker = startWorker(dir);
    this.#worker.unref();
    this.#worker.on('message', (answer: Answer) => this.#answered(answer));
    this.#worker.on('error', (err) => this.#fail(err));
    this.#worker.on('exit', (code) => this.#fail(new Error(`the tokenizer worker exited (code ${code})`)));
    this.loaded = this.encode('').then(
      () => {},
      () => {},
    );
  }

  /** The token ids of `text` (as ChatModel.encode), from the worker. */
  encode(text: string): Promise<Uint32Array> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    let answer = this.#byText.get(text);
    if (answer === undefined) {
      if (this.#pending.size >= MAX_BACKLOG) return Promise.reject(new TokenizerBusy(`${MAX_BACKLOG} texts queued`));
      const id = this.#nextId++;
      answer = new Promise<Uint32Array>((resolve, reject) => this.#pending.set(id, { resolve, reject }));
      this.#byText.set(text, answer);
      const settled = () => this.#byText.delete(text);
      answer.then(settled, settled);
      this.#worker.postMessage({ id, text });
    }
    return answer;
  }

  /** Texts being tokenized now. */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** ms the worker's thread has been busy (its event loop active: loading, tokenizing), as it reports it. */
  get busyMs(): number {
    return this.#worker.performance.eventLoopUtilization().active;
  }

  async close(): Promise<void> {
    await this.#worker.terminate();
  }

  #answered({ id, ids, error }: Answer): void {
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    this.#pending.delete(id);
    if (ids !== undefined) pending.resolve(ids);
    else pending.reject(new Error(error ?? 'the tokenizer worker gave no ids'));
  }

  #fail(err: Error): void {
    this.#failure ??= err;
    for (const pending of this.#pending.values()) pending.reject(this.#failure);
    this.#pending.clear();
  }
}
