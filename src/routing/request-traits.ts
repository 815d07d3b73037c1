/**
 * What admission and routing may know about a request besides its arrival: its priority class and
 * API key (from its headers), and for prefix-aware routing the hashed blocks of its prompt prefix
 * and its session key (from the body, parsed once by proxy/request-context-from.ts, computed only
 * when the policy uses them, so that other policies pay nothing).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isObject } from '../config/json-object.js';
import { generationApiOf, messageText } from './openai-request.js';
import { blockHashes, hashText } from './text-hash.js';

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
  /**
   * kv-aware's block keys (fleet/kv-events/block-keys.ts) of the prompt's token ids as the model's
   * tokenizer and chat template give them (proxy/kv-request-blocks.ts); absent without a model.
   */
  readonly kvKeys?: readonly number[];
}

export interface TraitsOptions {
  blockChars: number;
  /** Lower-case header name, or null for no session pinning. */
  sessionHeader: string | null;
}

type Body = Record<string, unknown>;

/** A prompt without messages: its first this many characters are its prefix key's span. */
const KEY_CHARS = 2048;

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
  const api = generationApiOf(path);
  if (api === 'chat') {
    if (!Array.isArray(body.messages)) return null;
    let out = body.tools === undefined ? '' : `${JSON.stringify(body.tools)}\n`;
    let keyEnd = -1;
    for (const message of body.messages as Body[]) {
      const role = messageText(message?.role);
      out += `<${role}>${messageText(message?.content)}\n`;
      if (message?.tool_calls !== undefined) out += `${JSON.stringify(message.tool_calls)}\n`;
      if (keyEnd < 0 && role !== 'system' && role !== 'developer') keyEnd = out.length;
    }
    return { text: out, keyEnd: keyEnd < 0 ? out.length : keyEnd };
  }
  let text: string | null = null;
  if (api === 'completion') text = body.prompt === undefined ? null : messageText(body.prompt);
  else if (api === 'generate') {
    const prompt = body.text ?? body.input_ids;
    text = prompt === undefined ? null : messageText(prompt);
  }
  return text === null ? null : { text, keyEnd: Math.min(text.length, KEY_CHARS) };
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
  const rendered = isObject(json) ? render(path, json) : null;
  let opening = false;
  if (rendered !== null) {
    prefix = blockHashes(rendered.text, opts.blockChars);
    key ??= hashText(rendered.text.slice(0, rendered.keyEnd));
    opening = session === undefined && rendered.keyEnd === rendered.text.length;
  }
  if (prefix === undefined && session === undefined) return undefined;
  return { prefix, blockChars: opts.blockChars, session, key, opening };
}
