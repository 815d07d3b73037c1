/** Deterministic "model output" and token counting for the simulator. */

/** One word per token; the answer to SGLang's own warm-up prompt starts with " Paris". */
const WORDS = [
  ' Paris',
  '.',
  ' It',
  ' is',
  ' the',
  ' capital',
  ' and',
  ' most',
  ' populous',
  ' city',
  ' of',
  ' France',
  ',',
  ' known',
  ' for',
  ' its',
  ' art',
  ',',
  ' food',
  ' and',
  ' culture',
  '.',
];

/** Llama 3's `<|eot_id|>`, reported as `matched_stop` when a request ends early. */
export const EOS_TOKEN_ID = 128009;

export function tokenText(index: number): string {
  return WORDS[index % WORDS.length];
}

export function tokenId(index: number): number {
  return 1000 + (index % WORDS.length);
}

/** The first `count` tokens' text. */
export function outputText(count: number): string {
  let text = '';
  for (let i = 0; i < count; i++) text += tokenText(i);
  return text;
}

export function outputIds(count: number): number[] {
  const ids: number[] = new Array(count);
  for (let i = 0; i < count; i++) ids[i] = tokenId(i);
  return ids;
}

/** About four characters per token, at least one. */
export function countPromptTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

const LEN_MARKER = /<sim:len=(\d+)>/g;

/**
 * `<sim:len=N>` in a prompt makes the answer end after N tokens, like a model emitting its end token.
 * The last marker counts: in a conversation, the latest user message's.
 */
function stopAfter(text: string): number | null {
  let last: string | null = null;
  for (const match of text.matchAll(LEN_MARKER)) last = match[1];
  return last === null ? null : Number(last);
}

/**
 * Where an answer ends: after `maxTokens` new tokens, or earlier where the prompt's `<sim:len=N>`
 * says (N tokens in all, counting the `offset` the prompt already holds), like a model's end token.
 */
export function answerTarget(
  promptText: string,
  offset: number,
  maxTokens: number,
): { target: number; stopReason: 'length' | 'stop' } {
  const stop = stopAfter(promptText);
  const early = stop === null ? null : Math.max(1, stop - offset);
  return {
    target: Math.max(1, Math.min(maxTokens, early ?? maxTokens)),
    stopReason: early !== null && early < maxTokens ? 'stop' : 'length',
  };
}

/** `count` tokens' text from token number `offset` on: the rest of an answer whose first `offset` tokens were given. */
export function outputTextFrom(offset: number, count: number): string {
  let text = '';
  for (let i = offset; i < offset + count; i++) text += tokenText(i);
  return text;
}

/** A text split into what came before the simulated answer's start and that start's token count. */
export interface Continued {
  before: string;
  tokens: number;
}

/**
 * How much of the simulated answer `text` ends with: the largest `k` such that `text` ends with
 * `outputText(k)`. A continuation request (chat `continue_final_message`, a completions prompt
 * extended by the text already generated) then goes on with token number `k`, so a stream cut and
 * continued reads exactly like an uncut one. Since the answer repeats with the period of WORDS, one
 * backward walk per residue finds every candidate: O(22 * matched words), not O(k^2).
 */
export function continuedFrom(text: string): Continued {
  const period = WORDS.length;
  let best: Continued = { before: text, tokens: 0 };
  for (let last = 0; last < period; last++) {
    const positions: number[] = [text.length];
    let pos = text.length;
    for (let j = last; ; j = (j - 1 + period) % period) {
      const word = WORDS[j];
      if (pos < word.length || !text.startsWith(word, pos - word.length)) break;
      pos -= word.length;
      positions.push(pos);
    }
    const matched = positions.length - 1;
    if (matched < last + 1) continue;
    const k = last + 1 + period * Math.floor((matched - last - 1) / period);
    if (k > best.tokens) best = { before: text.slice(0, positions[k]), tokens: k };
  }
  return best;
}

/** The answer's words after its opening ` Paris.` and ` It` (thinking.ts continues from them). */
export const ANSWER_TAIL_WORDS: readonly string[] = WORDS.slice(3);
