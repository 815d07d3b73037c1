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
export function stopAfter(text: string): number | null {
  let last: string | null = null;
  for (const match of text.matchAll(LEN_MARKER)) last = match[1];
  return last === null ? null : Number(last);
}
