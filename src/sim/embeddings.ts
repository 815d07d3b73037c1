/**
 * `/v1/embeddings` in the OpenAI shape both engines answer with (`data: [{object, embedding, index}]`,
 * `usage.prompt_tokens`), so a batch or a proxy test can send embeddings through the fleet. The
 * vector is a cheap deterministic function of the input text (same text, same vector); it does not
 * go through the simulated scheduler, as an embedding is one forward pass with no decode.
 */
import { countPromptTokens } from './text-gen.js';

/** Small on purpose: the shape matters to callers, not the size. */
const DIMENSIONS = 8;

type Input = string | number[];

/** The inputs of a request body (`input`: a string, strings, token ids or lists of token ids), or the 400 message. */
function inputsOf(body: unknown): Input[] | string {
  const input = (body as { input?: unknown } | null)?.input;
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return 'input: Field required (a string or a non-empty list)';
  if (input.every((x) => typeof x === 'number')) return [input as number[]];
  if (input.every((x) => typeof x === 'string' || (Array.isArray(x) && x.every((n) => typeof n === 'number'))))
    return input as Input[];
  return 'input: expected a string, a list of strings, or token ids';
}

/** A unit vector from the text's bytes (FNV-1a per dimension). */
function vectorOf(input: Input): number[] {
  const text = typeof input === 'string' ? input : input.join(',');
  const raw = Array.from({ length: DIMENSIONS }, (_, d) => {
    let h = 0x811c9dc5 ^ d;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    return ((h >>> 0) / 0xffffffff) * 2 - 1;
  });
  const norm = Math.hypot(...raw) || 1;
  return raw.map((x) => x / norm);
}

function tokensOf(input: Input): number {
  return typeof input === 'string' ? countPromptTokens(input) : Math.max(1, input.length);
}

/** The answer body for a parsed request body, or the 400 message. */
export function embeddingsBody(body: unknown, model: string): string | { error: string } {
  const inputs = inputsOf(body);
  if (typeof inputs === 'string') return { error: inputs };
  const promptTokens = inputs.reduce((sum, input) => sum + tokensOf(input), 0);
  return JSON.stringify({
    object: 'list',
    data: inputs.map((input, index) => ({ object: 'embedding', embedding: vectorOf(input), index })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  });
}
