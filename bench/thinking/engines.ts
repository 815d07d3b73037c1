/**
 * Simulated thinking engines for bench:thinking: each one `fleetgate sim` process of its own (the
 * built CLI, as users run it), so one can be `kill -9`ed by its PID like a dying engine; and the
 * figures read from an engine's `/metrics` (its generation counter, its running requests).
 */
import { join } from 'node:path';
import { request } from 'undici';
import { freePorts, type Managed, spawnPinned, waitFor } from '../lib/procs.js';
import { FLEETGATE_CLI, type RunningTarget, startTarget } from '../lib/targets.js';

export interface EngineSpec {
  /** The model directory (`--model-path`): the packaged Qwen3 tokenizer and chat template. */
  modelDir: string;
  tokenMs: number;
  thinkTokens: readonly [number, number];
  maxRunning: number;
  /** KV pool in tokens: room for every running answer, so no retraction regenerates tokens. */
  maxTotalTokens: number;
  cpu: number | null;
  logDir: string;
}

export interface Engine {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  proc: Managed;
}

function spawnEngine(spec: EngineSpec, name: string, port: number): Managed {
  const [minThink, maxThink] = spec.thinkTokens;
  return spawnPinned(
    name,
    process.execPath,
    [
      FLEETGATE_CLI,
      'sim',
      '--port',
      String(port),
      '--name',
      name,
      '--model-path',
      spec.modelDir,
      '--reasoning-parser',
      'qwen3',
      '--think-tokens',
      `${minThink}-${maxThink}`,
      '--token-ms',
      String(spec.tokenMs),
      '--max-running',
      String(spec.maxRunning),
      '--max-total-tokens',
      String(spec.maxTotalTokens),
      '--speed',
      'fast',
      '--quiet',
    ],
    { cpu: spec.cpu, logFile: join(spec.logDir, `${name}-${port}.log`) },
  );
}

async function healthy(engine: Engine): Promise<boolean> {
  if (engine.proc.child.exitCode !== null || engine.proc.child.signalCode !== null) {
    throw new Error(`${engine.name} exited early (see its log)`);
  }
  try {
    const res = await request(`${engine.url}/health`, { headersTimeout: 2000, bodyTimeout: 2000 });
    await res.body.dump();
    return res.statusCode === 200;
  } catch {
    return false;
  }
}

/** Starts `ports.length` engines named gpu0.. and waits (at most 60 s) until each answers /health. */
async function startEngines(spec: EngineSpec, ports: number[]): Promise<Engine[]> {
  const engines = ports.map((port, i) => {
    const name = `gpu${i}`;
    return { name, port, url: `http://127.0.0.1:${port}`, proc: spawnEngine(spec, name, port) };
  });
  try {
    await waitFor(async () => (await Promise.all(engines.map(healthy))).every(Boolean), 'engines healthy', 60_000, 100);
  } catch (error) {
    await stopEngines(engines);
    throw error;
  }
  return engines;
}

/** A killed engine started again on its port (same name, same options). */
async function respawn(spec: EngineSpec, engine: Engine): Promise<void> {
  engine.proc = spawnEngine(spec, engine.name, engine.port);
  await waitFor(() => healthy(engine), `${engine.name} healthy again`, 60_000, 100);
}

async function stopEngines(engines: readonly Engine[]): Promise<void> {
  await Promise.all(engines.map((engine) => engine.proc.stop(3000)));
}

/** The value of a Prometheus sample named `name` (first series), or NaN. */
function metricValue(text: string, name: string): number {
  const match = new RegExp(`^${name.replace(/[:]/g, '\\$&')}(?:\\{[^}]*\\})? ([0-9.eE+-]+|NaN)$`, 'm').exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

/** Sum of every series of `name`. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))) {
    sum += Number(match[1]);
  }
  return sum;
}

/** Sum of every series of `name` per value of its label `label`. */
export function metricByLabel(text: string, name: string, label: string): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const match of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} ([0-9.eE+-]+)$`, 'gm'))) {
    const value = new RegExp(`${label}="([^"]*)"`).exec(match[1])?.[1] ?? '';
    sums[value] = (sums[value] ?? 0) + Number(match[2]);
  }
  return sums;
}

export async function scrape(url: string): Promise<string> {
  const res = await request(`${url}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return res.body.text();
}

export interface EngineCounters {
  /** `sglang:generation_tokens_total`: every token the engine generated (its start-up warm-up included). */
  generated: number;
  running: number;
  queued: number;
}

export async function engineCounters(engine: Engine): Promise<EngineCounters> {
  const text = await scrape(engine.url);
  return {
    generated: metricValue(text, 'sglang:generation_tokens_total'),
    running: metricValue(text, 'sglang:num_running_reqs'),
    queued: metricValue(text, 'sglang:num_queue_reqs'),
  };
}

async function readyCount(target: RunningTarget): Promise<number> {
  const res = await request(`${target.urls[0]}/fleet/status`, { headersTimeout: 2000, bodyTimeout: 2000 });
  return ((await res.body.json()) as { ready?: number }).ready ?? 0;
}

/** The engines and fleetgate in front of them with the model known (`model.dir`), shared by the job's arms and the latency. */
export interface Fleet {
  spec: EngineSpec;
  engines: Engine[];
  fleetgate: RunningTarget;
  /** Starts again every engine that was killed; waits until `targets` (default: fleetgate) see every engine ready. */
  whole(targets?: readonly RunningTarget[]): Promise<void>;
  stop(): Promise<void>;
}

export async function startFleet(spec: EngineSpec, count: number, proxyCpu: number | null): Promise<Fleet> {
  const engines = await startEngines(spec, await freePorts(count));
  let fleetgate: RunningTarget;
  try {
    fleetgate = await startTarget(
      { name: 'fleetgate-model', kind: 'fleetgate', extraYaml: `model:\n  dir: ${spec.modelDir}\n` },
      { backends: engines.map((e) => e.url), cpu: proxyCpu, dir: join(spec.logDir, 'fleetgate-model') },
    );
  } catch (error) {
    await stopEngines(engines);
    throw error;
  }
  return {
    spec,
    engines,
    fleetgate,
    async whole(targets = [fleetgate]) {
      for (const engine of engines) {
        if (engine.proc.child.exitCode !== null || engine.proc.child.signalCode !== null) await respawn(spec, engine);
      }
      await waitFor(
        async () => (await Promise.all(targets.map(readyCount))).every((n) => n === engines.length),
        'every engine ready again',
        60_000,
        100,
      );
    },
    async stop() {
      await fleetgate.stop();
      await stopEngines(engines);
    },
  };
}
