/**
 * What admission and routing may know about a request besides its arrival: its priority class and
 * API key (from its headers), and for prefix-aware routing the hashed blocks of its prompt prefix
 * and its session key (from the body, parsed once by proxy/request-context-from.ts, computed only
 * when the policy uses them, so that other policies pay nothing).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { hashText } from './policies/rendezvous.js';

export interface RequestTraits extends PromptTraits {
  /** Its priority class (`queue.classes`), already checked to be a configured one. */
  priority: string;
  /** The client's API key (`Authorization: Bearer ...`), or null; requests of one key form one flow. */
  apiKey: string | null;
}

export interface PromptTraits {
  /**
   * Chained hashes of the prompt's leading blocks of `block_chars` characters: entry i names the
   * whole prefix up to the end of block i, so a match of i + 1 blocks is a shared prefix.
   */
  readonly prefix?: readonly number[];
  /** Characters per block of `prefix`. */
  readonly blockChars?: number;
  /** The session key header's value, when the client sent one. */
  readonly session?: string;
  /**
   * The prefix key replicas hash to a home backend (rendezvous.ts): the session key when sent, else
   * what every turn of a conversation starts with (`render`). Absent with neither.
   */
  readonly key?: number;
  /**
   * Nothing follows its key and it has no session key (a chat's first turn; a prompt within
   * `KEY_CHARS`): no backend holds this conversation yet, so there is no cache to keep it near.
   */
  readonly opening?: boolean;
}

export interface TraitsOptions {
  blockChars: number;
  /** Lower-case header name, or null for no session pinning. */
  sessionHeader: string | null;
}

/** At most this many blocks per request are hashed: longer prompts are told apart by their start already. */
export const MAX_REQUEST_BLOCKS = 1024;

type Body = Record<string, unknown>;

function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(textOf).join('');
  if (value !== null && typeof value === 'object') {
    const part = value as Body;
    if (typeof part.text === 'string') return part.text;
    return JSON.stringify(value);
  }
  return value === undefined || value === null ? '' : String(value);
}

/** A prompt without messages: its first this many characters are its prefix key's span. */
export const KEY_CHARS = 2048;

interface Rendered {
  text: string;
  /**
   * Length of the prefix that names a conversation (`PromptTraits.key`): for chat, the tools, the
   * system messages and the first other message, which every later turn repeats unchanged; else
   * the first `KEY_CHARS`.
   */
  keyEnd: number;
}

/**
 * The text a server renders first for this request, as its chat template would order it: tool
 * definitions, then every message with its role; or the prompt of `/v1/completions` and `/generate`.
 * Null when the path or body carries no prompt.
 */
function render(path: string, body: Body): Rendered | null {
  if (path.startsWith('/v1/chat/completions')) {
    if (!Array.isArray(body.messages)) return null;
    let out = body.tools === undefined ? '' : `${JSON.stringify(body.tools)}\n`;
    let keyEnd = -1;
    for (const message of body.messages as Body[]) {
      const role = textOf(message?.role);
      out += `<${role}>${textOf(message?.content)}\n`;
      if (message?.tool_calls !== undefined) out += `${JSON.stringify(message.tool_calls)}\n`;
      if (keyEnd < 0 && role !== 'system' && role !== 'developer') keyEnd = out.length;
    }
    return { text: out, keyEnd: keyEnd < 0 ? out.length : keyEnd };
  }
  let text: string | null = null;
  if (path.startsWith('/v1/completions')) text = body.prompt === undefined ? null : textOf(body.prompt);
  else if (path.startsWith('/generate')) {
    const prompt = body.text ?? body.input_ids;
    text = prompt === undefined ? null : textOf(prompt);
  }
  return text === null ? null : { text, keyEnd: Math.min(text.length, KEY_CHARS) };
}

/**
 * Two FNV-1a hashes run over the text and are read at each block end: their 53 bits make a
 * collision between the prefixes one backend holds unlikely (an approximate record tolerates one).
 */
export function blockHashes(text: string, blockChars: number): number[] {
  const count = Math.min(MAX_REQUEST_BLOCKS, Math.floor(text.length / blockChars));
  const hashes: number[] = new Array(count);
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let block = 0; block < count; block++) {
    const end = (block + 1) * blockChars;
    for (let i = block * blockChars; i < end; i++) {
      const c = text.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
    }
    hashes[block] = (a >>> 0) * 0x200000 + (b >>> 11);
  }
  return hashes;
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === '' ? undefined : first;
}

/** Keeps a session key apart from a prompt that happens to read the same. */
const SESSION_SEED = 0x5e55_1011;

/**
 * The request's prompt traits, from its body as parsed JSON (undefined: none, or not JSON); undefined
 * when it has neither a prompt nor a session key.
 */
export function promptTraits(
  path: string,
  headers: IncomingHttpHeaders,
  json: unknown,
  opts: TraitsOptions,
): PromptTraits | undefined {
  const session = opts.sessionHeader === null ? undefined : headerValue(headers, opts.sessionHeader);
  let prefix: number[] | undefined;
  let key = session === undefined ? undefined : hashText(session, SESSION_SEED);
  const rendered = json !== null && typeof json === 'object' ? render(path, json as Body) : null;
  let opening = false;
  if (rendered !== null) {
    prefix = blockHashes(rendered.text, opts.blockChars);
    key ??= hashText(rendered.text.slice(0, rendered.keyEnd));
    opening = session === undefined && rendered.keyEnd === rendered.text.length;
  }
  if (prefix === undefined && session === undefined) return undefined;
  return { prefix, blockChars: opts.blockChars, session, key, opening };
}
