/**
 * One table from an `AdmissionError` (routing/queue/wait-queue.ts) to the client's answer: status,
 * OpenAI error type, message and the access record's outcome. The HTTP side (reply-callbacks.ts)
 * answers from it and nothing else, as routing/dispatch/upstream-failures.ts is the one table for
 * upstream errors. Routing only names the refusal (its reason, class and whether any backend was
 * ready); the HTTP words are here. A queue that refuses while no backend is ready says the fleet is
 * unavailable (503); one that refuses while backends are up says the class is over its own limit
 * (429: the client should slow down).
 */
import type { AdmissionError, AdmissionFailure } from '../routing/queue/wait-queue.js';

export interface AdmissionRefusal {
  /** 499: the client left; nothing is answered, its connection is closed. */
  status: 429 | 499 | 503;
  type: 'rate_limit_exceeded' | 'fleet_unavailable';
  message: string;
  outcome: 'client_abort' | 'shutdown' | 'queue_full' | 'queue_timeout';
}

type Entry = Omit<AdmissionRefusal, 'message'> & { message: (error: AdmissionError) => string };

const FLEET_DOWN = (error: AdmissionError) => `no backend ready to serve the request: ${error.message}`;
const CLASS_FULL = (error: AdmissionError) =>
  `too many requests of class "${error.className}" waiting: ${error.message}`;
const AS_IS = (error: AdmissionError) => error.message;

/** By reason; a queue's own refusal also by whether any backend was ready when it refused. */
const REFUSALS: Record<AdmissionFailure, Entry | { ready: Entry; none: Entry }> = {
  aborted: { status: 499, type: 'fleet_unavailable', message: AS_IS, outcome: 'client_abort' },
  shutdown: { status: 503, type: 'fleet_unavailable', message: AS_IS, outcome: 'shutdown' },
  queue_full: {
    ready: { status: 429, type: 'rate_limit_exceeded', message: CLASS_FULL, outcome: 'queue_full' },
    none: { status: 503, type: 'fleet_unavailable', message: FLEET_DOWN, outcome: 'queue_full' },
  },
  timeout: {
    ready: { status: 429, type: 'rate_limit_exceeded', message: CLASS_FULL, outcome: 'queue_timeout' },
    none: { status: 503, type: 'fleet_unavailable', message: FLEET_DOWN, outcome: 'queue_timeout' },
  },
};

export function admissionRefusal(error: AdmissionError): AdmissionRefusal {
  const row = REFUSALS[error.reason];
  const entry = 'ready' in row ? (error.fleetUnavailable ? row.none : row.ready) : row;
  return { ...entry, message: entry.message(error) };
}
