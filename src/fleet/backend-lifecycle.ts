/**
 * The backend lifecycle: a pure state machine. Events in, state out, clock injected.
 *
 * Each source of health keeps its own facts (probe, log, passive traffic, operator), each updated
 * by its own reducer; `#derive()` is the one place they are combined into a state, as Envoy's
 * `HostImpl::health()` combines its health flags.
 */
import type { LogEvent, Phase, Progress } from './logs/log-events.js';

export type BackendState = 'down' | 'starting' | 'ready' | 'unhealthy' | 'draining' | 'failed';
export const BACKEND_STATES: readonly BackendState[] = ['down', 'starting', 'ready', 'unhealthy', 'draining', 'failed'];

/** What one readiness probe found. `reachable`: something answered HTTP at all. */
export interface ProbeResult {
  ok: boolean;
  reachable: boolean;
  /** Why it failed (`connection refused`, `/health 503`, `timeout after 5s`, ...); null when ok. */
  reason: string | null;
  /** The probe saw a server that is starting (e.g. SGLang's 503 during warm-up). */
  phase?: Phase | null;
  /** When ok: the model names the backend serves (first: the name it answers to). */
  models?: readonly string[];
}

/** Typed outcome of one proxied attempt, as Envoy's `putResult`. */
export type TrafficOutcome = 'ok' | 'connect_refused' | 'reset' | 'timeout' | 'http_5xx';

export type BackendEvent =
  | { type: 'probe'; result: ProbeResult }
  | { type: 'traffic'; outcome: TrafficOutcome; detail?: string }
  /** The progress watchdog saw requests go in and nothing come out (progress-watchdog.ts). */
  | { type: 'no_progress'; reason: string }
  | { type: 'log'; event: LogEvent }
  | { type: 'log_line'; line: string }
  | { type: 'drain' }
  | { type: 'resume' }
  /** `fleetgate launch` stopped restarting the engine (`max_restarts` in a row), or was told to try again (null). */
  | { type: 'gave_up'; reason: string | null }
  /** `fleetgate launch` saw the engine's process end (`exited with code 1`, `killed by SIGKILL`). */
  | { type: 'process_exit'; detail: string }
  | { type: 'tick' };

export interface LifecycleOptions {
  rise: number;
  fall: number;
  /** ms without log progress while starting before the reason becomes `stalled`. */
  stallAfter: number;
  /** A log is configured: its ready line since the latest start is required for admission. */
  hasLog: boolean;
  /**
   * ms an ejection by live traffic or the progress watchdog holds the backend out at least, times
   * its ejections in a row (Envoy's `base_ejection_time`); 0 = re-admit at `rise` passing probes.
   */
  ejectionTime?: number;
  /** Cap of that hold (Envoy's `max_ejection_time`). */
  maxEjectionTime?: number;
  /**
   * ms a start-up failure suspect (a `suspect` log event) may go without start-up progress before
   * it fails the backend (`health.failure_quiet`); an exit or a lost port fails it at once; 0 = off.
   */
  failureQuiet?: number;
  now: () => number;
}

export interface BackendSnapshot {
  state: BackendState;
  phase: Phase | null;
  progress: Progress | null;
  etaSeconds: number | null;
  reason: string | null;
  /** ms epoch of the latest state change. */
  since: number;
  /** Seconds from the latest start (or first sight) to ready; null until then. */
  readySeconds: number | null;
  lastLogLine: string | null;
}

/** What turned a start-up failure suspect into `failed`. */
export const SUSPECT_CAUSES = ['exit', 'port_down', 'quiet'] as const;
export type SuspectCause = (typeof SUSPECT_CAUSES)[number];

export interface Transition {
  from: BackendState;
  to: BackendState;
  reason: string | null;
  at: number;
  /** Set when a start-up failure suspect became the failure, and by what. */
  cause?: SuspectCause;
}

interface ProbeFacts {
  reachable: boolean | null;
  passes: number;
  failures: number;
  reason: string | null;
  phase: Phase | null;
}

interface LogFacts {
  /** The log showed start-up lines since the latest start. */
  starting: boolean;
  readyLine: boolean;
  fatal: string | null;
  /** A start-up failure suspect (traceback's final exception, runbook-grep line) and when it came. */
  suspect: string | null;
  suspectAt: number;
  phase: Phase | null;
  progress: Progress | null;
  etaSeconds: number | null;
  lastProgressAt: number;
  lastLine: string | null;
}

interface PassiveFacts {
  /** Ejected by real traffic or the watchdog; cleared by `rise` passing probes once `heldUntil` is past. */
  ejected: string | null;
  heldUntil: number;
  /** Ejections in a row: each full `ejectionTime` spent ready since the latest re-admission takes one off. */
  ejections: number;
  readmittedAt: number;
  consecutiveFailures: number;
}

const MAX_LOG_LINE = 300;

function noPassiveFacts(): PassiveFacts {
  return { ejected: null, heldUntil: 0, ejections: 0, readmittedAt: 0, consecutiveFailures: 0 };
}

export class BackendLifecycle {
  readonly #opts: LifecycleOptions;
  #probe: ProbeFacts = { reachable: null, passes: 0, failures: 0, reason: null, phase: null };
  #log: LogFacts;
  #passive: PassiveFacts = noPassiveFacts();
  #draining = false;
  #gaveUp: string | null = null;
  /** The process ended since the latest start (`fleetgate launch` knows). */
  #exited = false;
  /** A suspect became the failure since the last transition: what did it. */
  #suspectCause: SuspectCause | null = null;
  /** Admitted since the latest start: failures from here on mean `unhealthy`, not `starting`. */
  #wasReady = false;
  /** Seen down (refused) since it was ready or failed: coming back up is a fresh start. */
  #sawDown = false;
  #startedAt: number;
  #readySeconds: number | null = null;
  #state: BackendState = 'down';
  #reason: string | null = null;
  #since: number;

  constructor(opts: LifecycleOptions) {
    this.#opts = opts;
    this.#startedAt = opts.now();
    this.#since = this.#startedAt;
    this.#log = this.#freshLog();
  }

  get state(): BackendState {
    return this.#state;
  }

  get snapshot(): BackendSnapshot {
    const logPhase = this.#log.phase;
    const phase = this.#state === 'ready' ? null : (logPhase ?? this.#probe.phase);
    return {
      state: this.#state,
      phase,
      progress: phase !== null && phase === logPhase ? this.#log.progress : null,
      etaSeconds: phase !== null && phase === logPhase ? this.#log.etaSeconds : null,
      reason: this.#reason,
      since: this.#since,
      readySeconds: this.#readySeconds,
      lastLogLine: this.#log.lastLine,
    };
  }

  /** Applies one event; returns the transition if the state changed. */
  apply(event: BackendEvent): Transition | null {
    switch (event.type) {
      case 'probe':
        this.#onProbe(event.result);
        break;
      case 'traffic':
        this.#onTraffic(event.outcome, event.detail);
        break;
      case 'no_progress':
        this.#eject(event.reason, { hold: true });
        break;
      case 'log':
        this.#onLog(event.event);
        break;
      case 'log_line':
        this.#log.lastLine = event.line.length > MAX_LOG_LINE ? `${event.line.slice(0, MAX_LOG_LINE)}…` : event.line;
        break;
      case 'drain':
        this.#draining = true;
        break;
      case 'resume':
        this.#draining = false;
        break;
      case 'gave_up':
        this.#gaveUp = event.reason;
        break;
      case 'process_exit':
        this.#exited = true;
        this.#failSuspect('exit');
        break;
      case 'tick':
        break;
    }
    return this.#update();
  }

  #freshLog(): LogFacts {
    return {
      starting: false,
      readyLine: false,
      fatal: null,
      suspect: null,
      suspectAt: 0,
      phase: null,
      progress: null,
      etaSeconds: null,
      lastProgressAt: this.#opts.now(),
      lastLine: null,
    };
  }

  /**
   * A new process: forget what was learned about the previous one. With a log configured, the log
   * is the authority on starts (SGLang prints `server_args=` first), so a port coming back keeps it.
   */
  #freshStart({ keepLog = false } = {}): void {
    if (keepLog) {
      this.#log.fatal = null;
      this.#log.suspect = null;
    } else this.#log = this.#freshLog();
    this.#exited = false;
    this.#probe.passes = 0;
    this.#passive = noPassiveFacts();
    this.#wasReady = false;
    this.#sawDown = false;
    this.#startedAt = this.#opts.now();
    this.#readySeconds = null;
  }

  #onProbe(result: ProbeResult): void {
    const probe = this.#probe;
    if (result.reachable && this.#sawDown) {
      // Down then up again: a new process, even without a log to say so.
      this.#freshStart({ keepLog: this.#opts.hasLog });
    }
    if (!result.reachable && (this.#wasReady || this.#log.fatal !== null)) this.#sawDown = true;
    // Its port went away after a suspect: the process that logged it is gone.
    if (!result.reachable && probe.reachable === true) this.#failSuspect('port_down');
    probe.reachable = result.reachable;
    probe.reason = result.reason;
    probe.phase = result.ok ? null : (result.phase ?? null);
    if (result.ok) {
      probe.passes++;
      probe.failures = 0;
      const passive = this.#passive;
      const now = this.#opts.now();
      if (passive.ejected !== null && probe.passes >= this.#opts.rise && now >= passive.heldUntil) {
        passive.ejected = null;
        passive.consecutiveFailures = 0;
        passive.readmittedAt = now;
      }
    } else {
      probe.failures++;
      probe.passes = 0;
    }
  }

  #onTraffic(outcome: TrafficOutcome, detail: string | undefined): void {
    const passive = this.#passive;
    if (outcome === 'ok') {
      passive.consecutiveFailures = 0;
      return;
    }
    passive.consecutiveFailures++;
    const immediate = outcome === 'connect_refused' || outcome === 'reset';
    if (immediate || passive.consecutiveFailures >= this.#opts.fall) {
      // A refused or reset connection is seen by the probes too (a process gone, or a new one); only
      // failures a passing probe does not disprove hold the backend out.
      this.#eject(`${outcome.replace('_', ' ')}${detail ? `: ${detail}` : ''} on live traffic`, { hold: !immediate });
    }
  }

  /**
   * Out of rotation on what live traffic showed; re-admission needs `rise` fresh passing probes, after
   * the hold for a fault a passing probe does not disprove. The hold grows with ejections in a row: a
   * fault `/health` cannot see (a dead DP rank) would otherwise be re-admitted at its next probe.
   */
  #eject(reason: string, { hold }: { hold: boolean }): void {
    const passive = this.#passive;
    this.#probe.passes = 0;
    if (passive.ejected !== null) return;
    const base = hold ? (this.#opts.ejectionTime ?? 0) : 0;
    if (base === 0) {
      passive.ejected = reason;
      return;
    }
    const now = this.#opts.now();
    const forgiven = Math.floor((now - passive.readmittedAt) / base);
    passive.ejections = Math.max(0, passive.ejections - forgiven) + 1;
    const holdMs = Math.min(base * passive.ejections, Math.max(base, this.#opts.maxEjectionTime ?? base));
    passive.heldUntil = now + holdMs;
    passive.ejected =
      passive.ejections > 1 ? `${reason} (ejection ${passive.ejections} in a row: out ${holdMs / 1000} s)` : reason;
  }

  #onLog(event: LogEvent): void {
    const log = this.#log;
    const now = this.#opts.now();
    switch (event.type) {
      case 'start':
        this.#freshStart();
        this.#log.starting = true;
        this.#log.phase = 'launching';
        break;
      case 'phase':
        // A fatal line sticks until a fresh start; later phase lines cannot clear it.
        if (log.fatal !== null) return;
        log.suspect = null;
        log.starting = true;
        log.phase = event.phase;
        log.progress = event.progress;
        log.etaSeconds = event.etaSeconds;
        log.lastProgressAt = now;
        break;
      case 'ready':
        if (log.fatal !== null) return;
        log.suspect = null;
        log.starting = true;
        log.readyLine = true;
        log.phase = null;
        log.progress = null;
        log.etaSeconds = null;
        log.lastProgressAt = now;
        break;
      case 'fatal':
        if (log.fatal === null) log.fatal = event.reason;
        break;
      case 'fatal_reason':
        // Only a crash already reported in this run: the state stays failed, its reason improves.
        if (log.fatal !== null) log.fatal = event.reason;
        break;
      case 'suspect':
        // Before ready only: a live server's exception is one request's (the existing rules stand).
        if (log.fatal !== null || log.readyLine || this.#wasReady || !this.#suspectsOn()) return;
        log.suspect = event.reason;
        log.suspectAt = now;
        log.starting = true;
        if (this.#exited) this.#failSuspect('exit');
        break;
    }
  }

  #suspectsOn(): boolean {
    return (this.#opts.failureQuiet ?? 0) > 0;
  }

  /** The suspect is the failure: it sticks as a fatal line does, until a fresh start. */
  #failSuspect(cause: SuspectCause): void {
    const log = this.#log;
    if (log.suspect === null || log.fatal !== null) return;
    log.fatal = log.suspect;
    log.suspect = null;
    this.#suspectCause = cause;
  }

  #readyNow(): boolean {
    const probe = this.#probe;
    if (this.#passive.ejected !== null) return false;
    if (this.#opts.hasLog && !this.#log.readyLine) return false;
    if (this.#state === 'ready') return probe.failures < this.#opts.fall;
    return probe.passes >= this.#opts.rise;
  }

  #derive(): { state: BackendState; reason: string | null } {
    if (this.#draining) return { state: 'draining', reason: 'drained by operator' };
    if (this.#gaveUp !== null) return { state: 'failed', reason: this.#gaveUp };
    if (this.#log.fatal !== null) return { state: 'failed', reason: this.#log.fatal };
    if (this.#readyNow()) return { state: 'ready', reason: null };
    if (this.#wasReady) {
      return { state: 'unhealthy', reason: this.#passive.ejected ?? this.#probe.reason ?? 'failing checks' };
    }
    const stalled =
      this.#log.starting &&
      !this.#log.readyLine &&
      this.#opts.now() - this.#log.lastProgressAt >= this.#opts.stallAfter;
    if (this.#log.starting || this.#probe.reachable) {
      return { state: 'starting', reason: stalled ? 'stalled' : this.#startingReason() };
    }
    return { state: 'down', reason: this.#probe.reason };
  }

  /** Only reasons a person should act on; a 503 during warm-up is normal. */
  #startingReason(): string | null {
    const reason = this.#probe.reason;
    if (reason === null || this.#probe.phase !== null || !this.#probe.reachable) return null;
    return reason;
  }

  #update(): Transition | null {
    const log = this.#log;
    if (log.suspect !== null && this.#opts.now() - log.suspectAt >= (this.#opts.failureQuiet ?? 0)) {
      this.#failSuspect('quiet');
    }
    const cause = this.#suspectCause;
    this.#suspectCause = null;
    const { state, reason } = this.#derive();
    this.#reason = reason;
    if (state === 'ready' && !this.#wasReady) {
      this.#wasReady = true;
      this.#readySeconds = (this.#opts.now() - this.#startedAt) / 1000;
    }
    if (state === this.#state) return null;
    const from = this.#state;
    this.#state = state;
    this.#since = this.#opts.now();
    const transition: Transition = { from, to: state, reason, at: this.#since };
    if (cause !== null && state === 'failed') transition.cause = cause;
    return transition;
  }
}
