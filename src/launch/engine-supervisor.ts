/**
 * Supervises one launched engine: starts it, and stops and restarts it when it exits, fails, stalls
 * while starting or is ejected for lack of progress (`restartTrigger`), with the restart policy's
 * backoff and the remedies applied to its next command line. Reports to the registry.
 */
import type { Logger } from 'pino';
import type { LaunchConfig, LaunchEngine } from '../config/types.js';
import type { Backend, FleetRegistry, RestartReason, Supervision } from '../fleet/registry.js';
import { type EngineExit, EngineProcess } from './engine-process.js';
import { applyRemedies } from './remedies.js';
import { RestartPolicy } from './restart-policy.js';
import { restartTrigger } from './restart-triggers.js';

export interface EngineSupervisorOptions {
  engine: LaunchEngine;
  launch: LaunchConfig;
  registry: FleetRegistry;
  logger: Logger;
  now?: () => number;
}

/**
 * uvicorn's message when another process holds the port (a server from an earlier run, never
 * killed). That engine is reported, not fought over: fleetgate does not kill what it did not start,
 * and restarting ours cannot help.
 */
const PORT_TAKEN = /address already in use/i;

function describeExit(exit: EngineExit): string {
  if (exit.error !== null) return `could not start: ${exit.error}`;
  if (exit.signal !== null) return `killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

export class EngineSupervisor {
  readonly engine: LaunchEngine;
  readonly #opts: EngineSupervisorOptions;
  readonly #now: () => number;
  readonly #policy: RestartPolicy;
  readonly #log: Logger;
  #argv: string[];
  #proc: EngineProcess | null = null;
  #info: Supervision = { pid: null, restarts: 0, lastExit: null, nextRestartAt: null, remedy: null };
  #timer: NodeJS.Timeout | null = null;
  /** A run being stopped before its restart; triggers meanwhile are ignored. */
  #ending: Promise<void> | null = null;
  #closed = false;
  /** The trigger last seen, so that a state that persists acts once. */
  #lastTrigger: string | null = null;
  /** The fatal reason the registry reported since the latest start: what remedies match. */
  #failure: string | null = null;

  constructor(opts: EngineSupervisorOptions) {
    this.#opts = opts;
    this.engine = opts.engine;
    this.#now = opts.now ?? Date.now;
    this.#argv = [...opts.engine.argv];
    this.#log = opts.logger.child({ backend: opts.engine.name });
    this.#policy = new RestartPolicy({
      backoffMs: opts.launch.restart_backoff,
      backoffMaxMs: opts.launch.restart_backoff_max,
      stableAfterMs: opts.launch.stable_after,
      maxRestarts: opts.launch.max_restarts,
      now: this.#now,
    });
  }

  get pid(): number | null {
    return this.#proc?.pid ?? null;
  }

  get argv(): readonly string[] {
    return this.#argv;
  }

  start(): void {
    this.#spawn();
  }

  /** The registry's view of the backend changed. */
  observe(backend: Backend): void {
    const { state, reason } = backend.lifecycle.snapshot;
    if (state === 'ready') this.#policy.ready();
    else this.#policy.notReady();
    const trigger = restartTrigger(state, reason);
    const key = trigger === null ? null : `${trigger}: ${reason}`;
    if (key === null || key === this.#lastTrigger) {
      this.#lastTrigger = key;
      return;
    }
    this.#lastTrigger = key;
    if (trigger === 'failed') this.#failure = reason;
    if (this.#proc !== null && this.#ending === null && !this.#closed && trigger !== null) {
      this.#log.warn({ reason }, `engine ${this.engine.name} ${trigger}: stopping it for a restart`);
      void this.#end(trigger, false);
    }
  }

  /** An operator's restart: now, without backoff, as the start of a fresh series. */
  restart(): void {
    this.#policy.reset();
    const backend = this.#backend();
    if (backend !== undefined) this.#opts.registry.apply(backend, { type: 'gave_up', reason: null });
    if (this.#ending !== null) return;
    if (this.#proc !== null) {
      void this.#end('operator', true);
      return;
    }
    // Waiting out a backoff, or given up: start now.
    this.#clearTimer();
    this.#respawn('operator');
  }

  /** Stops the engine's whole process group (SIGTERM, then SIGKILL after `stop_grace`). */
  async stop(): Promise<void> {
    this.#closed = true;
    this.#clearTimer();
    await this.#ending;
    const proc = this.#proc;
    if (proc !== null) await proc.stop(this.#opts.launch.stop_grace);
  }

  /** Leaves the engine running (`on_exit: keep`); returns its pid. */
  detach(): number | null {
    this.#closed = true;
    this.#clearTimer();
    return this.pid;
  }

  #spawn(): void {
    const { env, log } = this.engine;
    this.#failure = null;
    const stopWithParent = this.#opts.launch.on_exit === 'stop';
    const proc = new EngineProcess({ argv: this.#argv, env, log, stopWithParent });
    this.#proc = proc;
    this.#publish({ pid: proc.pid, nextRestartAt: null });
    this.#log.info({ pid: proc.pid, argv: this.#argv, log }, `engine ${this.engine.name} started (pid ${proc.pid})`);
    void proc.exited.then((exit) => {
      if (this.#proc !== proc || this.#ending !== null || this.#closed) return;
      this.#log.warn({ pid: proc.pid, ...exit }, `engine ${this.engine.name} ${describeExit(exit)}`);
      // A start-up failure suspect in its log becomes the failure (and the reason remedies match).
      const backend = this.#backend();
      if (backend !== undefined)
        this.#opts.registry.apply(backend, { type: 'process_exit', detail: describeExit(exit) });
      if (this.#ending === null && this.#proc === proc) void this.#end('exit', false);
    });
  }

  #end(trigger: RestartReason, immediate: boolean): Promise<void> {
    const ending = this.#stopAndSchedule(trigger, immediate).finally(() => {
      this.#ending = null;
    });
    this.#ending = ending;
    return ending;
  }

  async #stopAndSchedule(trigger: RestartReason, immediate: boolean): Promise<void> {
    const proc = this.#proc;
    const exit = proc === null ? null : await proc.stop(this.#opts.launch.stop_grace);
    this.#proc = null;
    const lastExit = exit === null ? this.#info.lastExit : { code: exit.code, signal: exit.signal };
    this.#publish({ pid: null, lastExit });
    if (this.#closed) return;
    const reason = this.#failure ?? (exit === null ? trigger : describeExit(exit));
    const decision = immediate ? { restart: true as const, delayMs: 0 } : this.#policy.next();
    if (!decision.restart) {
      const why = `gave up after ${decision.attempts} restarts in a row (launch.max_restarts): ${reason}`;
      this.#log.error(`engine ${this.engine.name} ${why}`);
      const backend = this.#backend();
      if (backend !== undefined) this.#opts.registry.apply(backend, { type: 'gave_up', reason: why });
      return;
    }
    this.#publish({ nextRestartAt: this.#now() + decision.delayMs });
    this.#log.info(`engine ${this.engine.name} restarts in ${decision.delayMs} ms (${trigger}: ${reason})`);
    this.#timer = setTimeout(() => this.#respawn(trigger, immediate ? null : reason), decision.delayMs);
  }

  /**
   * The fatal line if the log showed one by now (the process often exits before fleetgate has read
   * it), else how the process ended: what remedies match.
   */
  #respawn(trigger: RestartReason, fallbackReason: string | null = null): void {
    this.#timer = null;
    const reason = this.#failure ?? fallbackReason;
    if (trigger !== 'operator' && reason !== null && PORT_TAKEN.test(reason)) {
      const why = `not restarted: another process holds port ${this.engine.port} (${reason})`;
      this.#log.error(`engine ${this.engine.name} ${why}`);
      this.#publish({ nextRestartAt: null });
      const backend = this.#backend();
      if (backend !== undefined) this.#opts.registry.apply(backend, { type: 'gave_up', reason: why });
      return;
    }
    this.#count(trigger);
    if (reason !== null) {
      const { argv, applied } = applyRemedies(this.#argv, reason, this.#opts.launch.remedies);
      if (applied !== null) {
        this.#argv = argv;
        this.#publish({ remedy: applied });
        this.#log.warn({ remedy: applied, reason }, `engine ${this.engine.name}: remedy applied: ${applied}`);
      }
    }
    this.#spawn();
  }

  #count(trigger: RestartReason): void {
    this.#publish({ restarts: this.#info.restarts + 1 });
    const backend = this.#backend();
    if (backend !== undefined) this.#opts.registry.restarting(backend, trigger);
  }

  #publish(change: Partial<Supervision>): void {
    this.#info = { ...this.#info, ...change };
    const backend = this.#backend();
    if (backend !== undefined) this.#opts.registry.setSupervision(backend, this.#info);
  }

  #backend(): Backend | undefined {
    return this.#opts.registry.get(this.engine.name);
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
