/** Chat completion chunks as the simulator streams them, as SSE text, for tests of the stream journal. */
import { outputTextFrom } from '../../src/sim/text-gen.js';

/**
 * The chunks for tokens [from, from + count) of answer `id`: `role` first, `finish` last (a
 * `length` finish, a `usage` with this attempt's own figures, `[DONE]`).
 */
export function chatChunks(
  id: string,
  from: number,
  count: number,
  opts: { role?: boolean; finish?: boolean } = {},
): string {
  const head = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: from, model: `m-${id}`, choices: [{ index: 0, delta, finish_reason: finish }], usage: null })}\n\n`;
  let out = opts.role ? head({ role: 'assistant', content: '' }) : '';
  for (let i = from; i < from + count; i++) out += head({ role: null, content: outputTextFrom(i, 1) });
  if (opts.finish) {
    out += head({ content: null }, 'length');
    out += `data: ${JSON.stringify({ id, choices: [], usage: { prompt_tokens: 20 + from, completion_tokens: count, total_tokens: 20 + from + count } })}\n\n`;
    out += 'data: [DONE]\n\n';
  }
  return out;
}
