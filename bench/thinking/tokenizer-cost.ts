/**
 * What a token-exact resume costs fleetgate's CPU per cut stream: `tokenPlan` (render the request's
 * chat with the model's template, tokenize it and the part already generated) on the packaged Qwen3
 * model, for a 1 KB and an 8 KB chat, cut after `generated` reasoning tokens; and render + tokenize of
 * the prompt alone. CPU µs per call (this process's user + system time over the calls, after a
 * warm-up), each loop bounded in calls and in CPU time.
 */
import { loadChatModel, packagedQwen3Dir } from '../../src/model/chat-model.js';
import { tokenPlan } from '../../src/proxy/token-continuation.js';

export interface TokenizerCost {
  chatBytes: number;
  promptTokens: number;
  generatedTokens: number;
  /** CPU µs per call of render + encode of the prompt. */
  renderEncodeUs: number;
  /** CPU µs per call of tokenPlan (prompt and the cut answer). */
  tokenPlanUs: number;
  calls: number;
}

const WORDS =
  'the a fleet of engines serves long answers while a balancer routes each request to the least loaded one and keeps every stream alive when an engine dies'.split(
    ' ',
  );

/** A conversation whose messages hold about `bytes` bytes of text: a system prompt, then user / assistant turns. */
function chatOf(bytes: number): { role: string; content: string }[] {
  const messages = [{ role: 'system', content: 'You are a careful assistant. Think before you answer.' }];
  let size = messages[0].content.length;
  let turn = 0;
  while (size < bytes) {
    const words: string[] = [];
    let length = 0;
    while (length < Math.min(600, bytes - size)) {
      const word = WORDS[(turn * 7 + words.length * 3) % WORDS.length];
      words.push(word);
      length += word.length + 1;
    }
    const content = `${words.join(' ')}.`;
    messages.push({ role: turn % 2 === 0 ? 'user' : 'assistant', content });
    size += content.length;
    turn++;
  }
  if (messages.at(-1)?.role !== 'user') messages.push({ role: 'user', content: 'And then?' });
  return messages;
}

function cpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** CPU µs per call of `fn`: `warm` calls first, then up to `maxCalls` calls or `budgetMs` of CPU. */
function perCall(fn: () => unknown, warm: number, maxCalls: number, budgetMs: number): { us: number; calls: number } {
  for (let i = 0; i < warm; i++) fn();
  const start = cpuUs();
  let calls = 0;
  while (calls < maxCalls && cpuUs() - start < budgetMs * 1000) {
    fn();
    calls++;
  }
  return { us: (cpuUs() - start) / calls, calls };
}

export function measureTokenizerCost(opts: { sizes: number[]; generated: number; budgetMs: number }): TokenizerCost[] {
  const model = loadChatModel(packagedQwen3Dir());
  // The reasoning a client had when the stream was cut: `generated` one-token words.
  const reasoning = `\nOkay${' the user wants to know'.repeat(Math.ceil(opts.generated / 5))}`;
  return opts.sizes.map((bytes) => {
    const messages = chatOf(bytes);
    const body = { model: 'qwen3', messages, max_tokens: 8192, stream: true, temperature: 0.6 };
    const plan = tokenPlan(model, 'sglang', body, reasoning, '');
    if (plan === null) throw new Error('tokenPlan refused the cut');
    const render = perCall(() => model.encode(model.render(messages)), 5, 5000, opts.budgetMs);
    const full = perCall(() => tokenPlan(model, 'sglang', body, reasoning, ''), 5, 5000, opts.budgetMs);
    return {
      chatBytes: Buffer.byteLength(JSON.stringify(messages)),
      promptTokens: plan.promptTokens,
      generatedTokens: plan.generatedTokens,
      renderEncodeUs: render.us,
      tokenPlanUs: full.us,
      calls: full.calls,
    };
  });
}
