/** Several simulated servers started and stopped together (one per GPU of a data-parallel fleet). */
import { join } from 'node:path';
import { engineFor, type SimSpeed, timingFor } from './presets.js';
import { SimServer } from './sim-server.js';
import type { ReasoningParserName, VllmReasoningField } from './thinking.js';
import type { SimEngineOptions, SimFailure, SimOptions, SimTiming } from './types.js';

export class SimFleet {
  readonly servers: SimServer[];

  constructor(list: SimOptions[]) {
    this.servers = list.map((opts) => new SimServer(opts));
  }

  start(): void {
    for (const server of this.servers) server.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((server) => server.stop()));
  }
}

export interface FleetSpec {
  ports: number[];
  host?: string;
  model?: string;
  kind?: 'sglang' | 'vllm';
  version?: 'new' | 'old';
  speed?: SimSpeed;
  /** Writes `sglang_gpu{i}.log` (`vllm_gpu{i}.log` for vLLM) here; null for no logs. */
  logDir?: string | null;
  /** Server i waits i * staggerMs before its first line (servers launched one after another). */
  staggerMs?: number;
  /** Scripted failures by server index. */
  failures?: ReadonlyMap<number, SimFailure>;
  timing?: Partial<SimTiming>;
  engine?: Partial<SimEngineOptions>;
  restartAfterMs?: number | null;
  enableMetrics?: boolean;
  apiKey?: string | null;
  /** Thinking mode and the model directory, the same on every server (SimOptions). */
  modelPath?: string | null;
  reasoningParser?: ReasoningParserName | null;
  thinkTokens?: readonly [number, number];
  vllmReasoningField?: VllmReasoningField;
}

/** Options for a fleet named gpu0..gpuN-1, one per port. */
export function fleetOptions(spec: FleetSpec): SimOptions[] {
  const speed = spec.speed ?? 'demo';
  const prefix = spec.kind === 'vllm' ? 'vllm' : 'sglang';
  return spec.ports.map((port, i) => {
    const timing = timingFor(speed, spec.timing);
    timing.startDelayMs += i * (spec.staggerMs ?? 0);
    return {
      port,
      host: spec.host,
      name: `gpu${i}`,
      model: spec.model,
      kind: spec.kind,
      version: spec.version,
      logFile: spec.logDir ? join(spec.logDir, `${prefix}_gpu${i}.log`) : null,
      timing,
      engine: engineFor(speed, spec.engine),
      failure: spec.failures?.get(i) ?? null,
      restartAfterMs: spec.restartAfterMs ?? null,
      enableMetrics: spec.enableMetrics,
      apiKey: spec.apiKey ?? null,
      modelPath: spec.modelPath ?? null,
      reasoningParser: spec.reasoningParser ?? null,
      thinkTokens: spec.thinkTokens,
      vllmReasoningField: spec.vllmReasoningField,
    };
  });
}
