/**
 * What an OpenAI-style (or SGLang-native) generation request says, read the one way every part of
 * fleetgate reads it: which API its path names, and the text of a message or prompt.
 */

import { isObject } from '../config/json-object.js';

/** The generation APIs: OpenAI chat and completions, and SGLang's native `/generate`. */
export type GenerationApi = 'chat' | 'completion' | 'generate';

const APIS: ReadonlyMap<string, GenerationApi> = new Map([
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completion'],
  ['/generate', 'generate'],
]);

/** The generation API `path` (a request target, its query ignored) names; null for any other path. */
export function generationApiOf(path: string): GenerationApi | null {
  const query = path.indexOf('?');
  return APIS.get(query < 0 ? path : path.slice(0, query)) ?? null;
}

/**
 * The text of a message's `content`, a role or a prompt: a string as it is; an array (content parts,
 * several prompts, token ids) its items' texts joined; a part with a string `text` that text, any
 * other part its JSON (an image is part of what the model reads); nothing for null.
 */
export function messageText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(messageText).join('');
  if (isObject(value)) return typeof value.text === 'string' ? value.text : JSON.stringify(value);
  return value === undefined || value === null ? '' : String(value);
}
