/**
 * Thinking mode's output script: what a reasoning model (Qwen3, DeepSeek-R1) writes, token by
 * token, and which field of a chat answer each token lands in once a reasoning parser splits it.
 * Pure and shared by the simulated server and the tests, so a test computes exactly what an
 * uncut answer holds and compares a cut-and-resumed one against it (docs/sglang-vllm-behaviour.md,
 * "Thinking mode (reasoning parsers)").
 *
 * The raw output at script position j, for a reasoning length of R tokens:
 *   0 `<think>`, 1 `\n`, 2..R+1 reasoning words, R+2 `\n`, R+3 `</think>`, R+4 `\n\n`, R+5.. answer words
 * (Qwen3's shape: `<think>\n...\n</think>\n\n` then the answer). With thinking off
 * (`enable_thinking: false`: the template already holds an empty think block) the script is the
 * answer words alone. Every word is one token of Qwen3's tokenizer and the words re-tokenize to
 * themselves when concatenated (test/unit/sim-thinking.test.ts checks it with the real tokenizer),
 * so "tokens generated" equals the tokenizer's count of the raw text.
 */
import { ANSWER_TAIL_WORDS } from './text-gen.js';

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';

/** `--reasoning-parser` values the simulator knows (SGLang's names; `qwen3-thinking` forces reasoning). */
export const REASONING_PARSERS = ['qwen3', 'qwen3-thinking', 'deepseek-r1'] as const;
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

/**
 * vLLM's reasoning field by version: `reasoning_content` up to v0.11.0, `reasoning` since PR #27752
 * (Nov 2025; `reasoning_content` kept alongside for compatibility until PR #33402, Jan 2026, which
 * removed it): `both` is that transition.
 */
export const VLLM_REASONING_FIELDS = ['reasoning', 'reasoning_content', 'both'] as const;
export type VllmReasoningField = (typeof VLLM_REASONING_FIELDS)[number];

export const DEFAULT_THINK_TOKENS: readonly [number, number] = [32, 96];

/** Letters only: a punctuation word before the closing `\n` would merge with it (`.\n` is one Qwen3 token). */
const REASONING_WORDS = [
  ' the',
  ' user',
  ' wants',
  ' to',
  ' know',
  ' about',
  ' the',
  ' capital',
  ' of',
  ' France',
  ' so',
  ' I',
  ' should',
  ' recall',
  ' that',
  ' it',
  ' is',
  ' Paris',
  ' and',
  ' then',
  ' answer',
  ' briefly',
];
const FIRST_REASONING_WORD = 'Okay';

/**
 * The plain answer's words (text-gen.ts) after its opening ` Paris.`, which the thinking answer
 * writes as `Paris.` at the start of its content instead; then ` It` again, to loop.
 */
const ANSWER_WORDS = [...ANSWER_TAIL_WORDS, ' It'];
const FIRST_ANSWER_WORD = 'Paris';

/** Which field of a parsed chat answer a token's text goes to; a marker's text goes nowhere. */
export type TokenPart = 'marker' | 'reasoning' | 'content';

export interface ThinkingScript {
  /** Reasoning words between the markers (R); 0 with `answerOnly`. */
  readonly reasoningWords: number;
  /** Thinking off: the script is the answer words alone. */
  readonly answerOnly: boolean;
}

function reasoningWord(i: number): string {
  return i === 0 ? FIRST_REASONING_WORD : REASONING_WORDS[(i - 1) % REASONING_WORDS.length];
}

function answerWord(i: number): string {
  return i === 0 ? FIRST_ANSWER_WORD : ANSWER_WORDS[(i - 1) % ANSWER_WORDS.length];
}

/** Script position of `</think>`; the answer's first word is 2 later. */
export function closePosition(script: ThinkingScript): number {
  return script.answerOnly ? -1 : script.reasoningWords + 3;
}

/** The raw text of script position `j` and the field it belongs to. */
export function scriptToken(script: ThinkingScript, j: number): { text: string; part: TokenPart } {
  if (script.answerOnly) return { text: answerWord(j), part: 'content' };
  const r = script.reasoningWords;
  if (j === 0) return { text: THINK_OPEN, part: 'marker' };
  if (j === 1 || j === r + 2) return { text: '\n', part: 'reasoning' };
  if (j <= r + 1) return { text: reasoningWord(j - 2), part: 'reasoning' };
  if (j === r + 3) return { text: THINK_CLOSE, part: 'marker' };
  if (j === r + 4) return { text: '\n\n', part: 'content' };
  return { text: answerWord(j - r - 5), part: 'content' };
}

/** FNV-1a over UTF-16 units: cheap, stable across processes. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** R for a conversation: a hash of the rendered prompt up to the assistant turn, within `--think-tokens MIN-MAX`. */
export function reasoningWordsFor(conversation: string, thinkTokens: readonly [number, number]): number {
  const [min, max] = thinkTokens;
  return min + (hash(conversation) % (max - min + 1));
}

/** What script positions `from` .. `from + count - 1` hold, split as a reasoning parser splits them. */
export interface ScriptSpan {
  raw: string;
  reasoning: string;
  content: string;
  /** Tokens up to and including `</think>` (SGLang's `reasoning_tokens`). */
  untilClose: number;
  /** Tokens of the reasoning part, markers excluded (vLLM's `completion_tokens_details.reasoning_tokens`). */
  reasoningPart: number;
}

export function scriptSpan(script: ThinkingScript, from: number, count: number): ScriptSpan {
  const span: ScriptSpan = { raw: '', reasoning: '', content: '', untilClose: 0, reasoningPart: 0 };
  const close = closePosition(script);
  for (let j = from; j < from + count; j++) {
    const { text, part } = scriptToken(script, j);
    span.raw += text;
    if (part === 'reasoning') {
      span.reasoning += text;
      span.reasoningPart++;
    } else if (part === 'content') span.content += text;
    if (j <= close) span.untilClose++;
  }
  return span;
}
