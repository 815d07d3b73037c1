/**
 * bench:mixed's interactive client: one short streamed chat request every `intervalMs`. It runs in a
 * child process of its own (`forkInteractiveClient`), as a real user's client would on another
 * machine: in the bench's process it waited behind the batch job's burst of 896 requests in the
 * same event loop. `inProcess` keeps the old way, to measure that difference.
 */
import { fork } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

export interface InteractiveOptions {
  intervalMs: number;
  maxRequests: number;
  /** Send `X-Fleetgate-Priority: interactive`. */
  header: boolean;
  tokens: number;
}

interface InteractiveSample {
  /** ms from the client's start to this request's send. */
  sentMs: number;
  /** The same moment on the wall clock (epoch ms), to line it up with other processes' logs. */
  sentAtEpochMs: number;
  /** ms from send to the first body byte (the first SSE event: the first token); null if it failed. */
  ttftMs: number | null;
  status: number;
}

export interface InteractiveResult {
  samples: InteractiveSample[];
  /** The client process's worst event-loop delay in each second since its start, ms. */
  loopDelayMaxMs: number[];
}

export interface InteractiveClient {
  /** Resolves once `maxRequests` have been sent. */
  finished: Promise<void>;
  /** Stops sending, waits for the requests in flight, and returns what was measured. */
  stop(): Promise<InteractiveResult>;
}

/**
 * Open loop: the next request does not wait for the last; one keep-alive pool of its own with a
 * connection per request that can be in flight, so a request never waits in the client's own pool.
 */
export function interactiveClient(url: string, opts: InteractiveOptions): InteractiveClient {
  const pool = new Pool(url, { connections: opts.maxRequests, headersTimeout: 10 * 60_000, bodyTimeout: 10 * 60_000 });
  const loop = loopDelayPerSecond();
  const t0 = performance.now();
  const samples: InteractiveSample[] = [];
  const pending = new Set<Promise<void>>();
  const body = JSON.stringify({
    model: 'default',
    messages: [{ role: 'user', content: 'What is 2 + 2?' }],
    max_tokens: opts.tokens,
    stream: true,
  });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.header) headers['x-fleetgate-priority'] = 'interactive';
  const one = async () => {
    const started = performance.now();
    let first: number | null = null;
    let status = 0;
    try {
      const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body });
      status = res.statusCode;
      for await (const _chunk of res.body) first ??= performance.now();
    } catch {
      status = status || -1;
    }
    const ttftMs = status === 200 && first !== null ? first - started : null;
    samples.push({ sentMs: started - t0, sentAtEpochMs: performance.timeOrigin + started, ttftMs, status });
  };
  let sent = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const tick = () => {
    if (sent >= opts.maxRequests) {
      clearInterval(timer);
      done();
      return;
    }
    sent++;
    const p = one().finally(() => pending.delete(p));
    pending.add(p);
  };
  const timer = setInterval(tick, opts.intervalMs);
  tick();
  return {
    finished,
    async stop() {
      clearInterval(timer);
      done();
      await Promise.all(pending);
      await pool.close();
      return { samples, loopDelayMaxMs: loop.stop() };
    },
  };
}

function loopDelayPerSecond() {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const perSecond: number[] = [];
  const take = () => {
    perSecond.push(histogram.max / 1e6);
    histogram.reset();
  };
  const timer = setInterval(take, 1000);
  return {
    stop(): number[] {
      clearInterval(timer);
      take();
      histogram.disable();
      return perSecond;
    },
  };
}

type ToChild = { start: { url: string; opts: InteractiveOptions } } | { stop: true };
type ToParent = { ready: true } | { finished: true } | { result: InteractiveResult };

/**
 * The same client in a child process; talks over IPC. Resolves once the child has loaded (a second
 * or two on a busy machine), so that its first request goes out with a job started next.
 */
export async function forkInteractiveClient(url: string, opts: InteractiveOptions): Promise<InteractiveClient> {
  const child = fork(fileURLToPath(import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`interactive client exited with code ${code}`))),
  );
  exited.catch(() => {});
  const message = <T extends ToParent>(pick: (m: ToParent) => m is T) =>
    Promise.race([
      new Promise<T>((resolve) => {
        const on = (m: ToParent) => {
          if (!pick(m)) return;
          child.off('message', on);
          resolve(m);
        };
        child.on('message', on);
      }),
      exited,
    ]);
  await message((m): m is { ready: true } => 'ready' in m);
  const finished = message((m): m is { finished: true } => 'finished' in m).then(() => {});
  const result = message((m): m is { result: InteractiveResult } => 'result' in m);
  child.send({ start: { url, opts } } satisfies ToChild);
  return {
    finished,
    async stop() {
      child.send({ stop: true } satisfies ToChild);
      const { result: measured } = await result;
      child.disconnect();
      return measured;
    },
  };
}

function runAsChild(send: (m: ToParent) => void): void {
  let client: InteractiveClient | null = null;
  process.on('message', (m: ToChild) => {
    if ('start' in m) {
      client = interactiveClient(m.start.url, m.start.opts);
      void client.finished.then(() => send({ finished: true }));
    } else if (client) {
      void client.stop().then((result) => send({ result }));
    }
  });
  process.once('disconnect', () => process.exit(0));
  send({ ready: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  const send = process.send.bind(process);
  runAsChild((m) => send(m));
}
