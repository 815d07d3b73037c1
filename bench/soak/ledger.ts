/**
 * The soak's ledger (Jepsen's method): one row per request the soak sends, with what the client itself
 * received, checked against what the simulated engines must produce. Pure: the clients fill rows,
 * `summarize` turns them into the end table and `verdict` says whether the run passed.
 *
 * A whole answer of N tokens is the simulator's deterministic `outputText(N)` (src/sim/text-gen.ts),
 * on any engine and, once streams are resumed on another engine, across the cut: the text is checked
 * on the client side, so a gap or a repeat at a resume shows as a text that is not whole.
 */
import { outputText } from '../../src/sim/text-gen.js';

export type RequestKind = 'chat' | 'chat-stream' | 'completion' | 'completion-stream';
export type ClientName = 'fetch' | 'openai-sdk';
/** How the client behaves: reads normally, reads a stream slowly, or aborts mid-stream on purpose. */
export type ClientMode = 'normal' | 'slow-reader' | 'abort';

/**
 * - complete: a whole response (`[DONE]` or a finished JSON body) with its text;
 * - error: a clear error the client can act on: an HTTP error with an OpenAI `error.type`, or an SSE
 *   `event: error` with one;
 * - aborted: the client itself gave up mid-stream (`abort` mode);
 * - unclear: an answer that ended with neither a completion nor a clear error (a reset, a stream
 *   cut without an error event, a body that is not JSON);
 * - lost: nothing, neither answer nor error, within the request deadline.
 */
type Outcome = 'complete' | 'error' | 'aborted' | 'unclear' | 'lost';

export interface LedgerRow {
  id: number;
  kind: RequestKind;
  client: ClientName;
  mode: ClientMode;
  /** `max_tokens` asked for: a whole answer is exactly `outputText(tokens)`. */
  tokens: number;
  sentMs: number;
  /** When the client settled the row; null while open. */
  endedMs: number | null;
  outcome: Outcome | null;
  /** For `error`: the OpenAI error type (or `http_<status>` when the body named none); for `unclear`: what happened. */
  errorType: string | null;
  status: number | null;
  /** Engines the answer came from (the simulator's `x-sim-engine` header), in order. */
  backends: string[];
  /** The answer's text (complete rows). */
  text: string | null;
  /** How many times the client settled this row: more than once is a duplicate. */
  settlements: number;
}

export type TextVerdict = 'whole' | 'gap' | 'repeated';

/** `text` against the deterministic answer of `tokens` tokens. */
export function judgeText(text: string, tokens: number): TextVerdict {
  const expected = outputText(tokens);
  if (text === expected) return 'whole';
  return text.length > expected.length ? 'repeated' : 'gap';
}

export class Ledger {
  readonly rows: LedgerRow[] = [];

  open(spec: Pick<LedgerRow, 'kind' | 'client' | 'mode' | 'tokens' | 'sentMs'>): LedgerRow {
    const row: LedgerRow = {
      ...spec,
      id: this.rows.length + 1,
      endedMs: null,
      outcome: null,
      errorType: null,
      status: null,
      backends: [],
      text: null,
      settlements: 0,
    };
    this.rows.push(row);
    return row;
  }

  /** Records what the client got; a second settlement of one row is kept as a duplicate. */
  settle(row: LedgerRow, endedMs: number, result: Pick<LedgerRow, 'outcome'> & Partial<LedgerRow>): void {
    row.settlements++;
    if (row.settlements > 1) return;
    Object.assign(row, result, { endedMs });
  }
}

export interface LedgerTable {
  sent: number;
  completedWhole: number;
  /** Complete, but the text has a gap (missing or wrong tokens). */
  completedWithGap: number;
  clearErrors: number;
  errorsByType: Record<string, number>;
  abortedByClient: number;
  unclear: number;
  unclearByWhat: Record<string, number>;
  lost: number;
  /** Text repeated, or two settlements of one request. */
  duplicated: number;
  /** Still open at the end of the run. */
  stuck: number;
  /** Clear errors as a share of sent requests (client-visible errors). */
  errorShare: number;
  /** Clear errors on streams, by type: what stream resume is to bring to 0 for engine faults. */
  streamErrorsByType: Record<string, number>;
}

function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

export function summarize(rows: readonly LedgerRow[]): LedgerTable {
  const table: LedgerTable = {
    sent: rows.length,
    completedWhole: 0,
    completedWithGap: 0,
    clearErrors: 0,
    errorsByType: {},
    abortedByClient: 0,
    unclear: 0,
    unclearByWhat: {},
    lost: 0,
    duplicated: 0,
    stuck: 0,
    errorShare: 0,
    streamErrorsByType: {},
  };
  for (const row of rows) {
    if (row.settlements > 1) table.duplicated++;
    switch (row.outcome) {
      case null:
        table.stuck++;
        break;
      case 'complete': {
        const verdict = judgeText(row.text ?? '', row.tokens);
        if (verdict === 'whole') table.completedWhole++;
        else if (verdict === 'gap') table.completedWithGap++;
        else if (row.settlements <= 1) table.duplicated++;
        break;
      }
      case 'error': {
        table.clearErrors++;
        const type = row.errorType ?? 'untyped';
        bump(table.errorsByType, type);
        if (row.kind.endsWith('-stream')) bump(table.streamErrorsByType, type);
        break;
      }
      case 'aborted':
        table.abortedByClient++;
        break;
      case 'unclear':
        table.unclear++;
        bump(table.unclearByWhat, row.errorType ?? 'unknown');
        break;
      case 'lost':
        table.lost++;
        break;
    }
  }
  table.errorShare = table.sent === 0 ? 0 : table.clearErrors / table.sent;
  return table;
}

/** Why the ledger fails the run; empty when it passes. */
export function ledgerFailures(table: LedgerTable): string[] {
  const failures: string[] = [];
  if (table.sent === 0) failures.push('no request was sent');
  if (table.lost > 0) failures.push(`${table.lost} lost (no answer and no error within the deadline)`);
  if (table.duplicated > 0) failures.push(`${table.duplicated} duplicated`);
  if (table.stuck > 0) failures.push(`${table.stuck} stuck (still open at the end)`);
  if (table.unclear > 0) failures.push(`${table.unclear} ended with neither an answer nor a clear error`);
  if (table.completedWithGap > 0) failures.push(`${table.completedWithGap} completed with a gap in the text`);
  if (table.errorsByType.untyped) failures.push(`${table.errorsByType.untyped} errors without a type`);
  return failures;
}
