/** Log lines written while serving, common to the SGLang and vLLM dialects. */
import { STATUS_CODES } from 'node:http';

export interface PrefillStats {
  newSeqs: number;
  newTokens: number;
  cachedTokens: number;
  tokenUsage: number;
  running: number;
  queued: number;
  inputThroughput: number;
}

export interface DecodeStats {
  running: number;
  usedTokens: number;
  tokenUsage: number;
  genThroughput: number;
  queued: number;
}

export interface RuntimeLog {
  readonly enabled: boolean;
  /** Uvicorn access line: `INFO:     127.0.0.1:48290 - "GET /model_info HTTP/1.1" 200 OK`. */
  access(client: string, method: string, path: string, status: number): void;
  prefill(stats: PrefillStats): void;
  decode(stats: DecodeStats): void;
  retract(count: number, ratioBefore: number, ratioAfter: number): void;
  deprecated(path: string, replacement: string): void;
  healthFailed(ticMs: number, lastMs: number): void;
  close(): void;
}

export function accessText(client: string, method: string, path: string, status: number): string {
  return `INFO:     ${client} - "${method} ${path} HTTP/1.1" ${status} ${STATUS_CODES[status] ?? ''}`;
}

export function clockText(ms: number): string {
  const date = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`;
}

/** An ephemeral client port for the server's own warm-up requests. */
export function loopbackClient(): string {
  return `127.0.0.1:${32768 + Math.floor(Math.random() * 28000)}`;
}
