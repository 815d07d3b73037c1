/**
 * The answer one uninterrupted simulated engine gives a thinking-mode chat request, computed
 * without a server: what a test compares a cut-and-resumed stream against (fleetgate's token-exact
 * resume, issue #52). It runs the very functions the server runs (the prompt's plan, the budget
 * rule, the script), so it cannot drift from what the simulator sends.
 */
import { loadChatModel } from '../model/chat-model.js';
import { standInChat } from './generation.js';
import { engineFor } from './presets.js';
import { answerTarget } from './text-gen.js';
import { DEFAULT_THINK_TOKENS, type ReasoningParserName, scriptSpan } from './thinking.js';
import { chatPlan } from './thinking-prompt.js';

export interface ExpectedThinkingRequest {
  readonly messages: readonly unknown[];
  readonly chat_template_kwargs?: Readonly<Record<string, unknown>>;
  readonly tools?: unknown;
  readonly max_tokens?: number;
  readonly max_completion_tokens?: number;
}

/** The simulator's flags that decide the answer (`--model-path`, `--reasoning-parser`, `--think-tokens`, `--max-tokens`). */
export interface ExpectedThinkingSim {
  readonly modelPath?: string | null;
  readonly reasoningParser?: ReasoningParserName | null;
  readonly thinkTokens?: readonly [number, number];
  readonly defaultMaxTokens?: number;
}

export interface ExpectedThinkingAnswer {
  /** The raw output, markers inline (what `/generate` returns). */
  readonly raw: string;
  /** What a reasoning parser puts in `reasoning_content` / `reasoning` (the streamed deltas concatenated). */
  readonly reasoning: string;
  readonly content: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** SGLang's `usage.reasoning_tokens`: the tokens up to and including `</think>`. */
  readonly reasoningTokens: number;
  readonly finishReason: 'stop' | 'length';
}

export function expectedThinkingAnswer(
  request: ExpectedThinkingRequest,
  sim: ExpectedThinkingSim,
): ExpectedThinkingAnswer {
  const model = sim.modelPath ? loadChatModel(sim.modelPath) : null;
  const plan = chatPlan(
    {
      parser: sim.reasoningParser ?? null,
      thinkTokens: sim.thinkTokens ?? DEFAULT_THINK_TOKENS,
      model,
      vllmField: 'reasoning',
    },
    request.messages,
    request.chat_template_kwargs,
    request.tools,
    standInChat(request.messages, request.tools),
  );
  const maxTokens =
    request.max_completion_tokens ?? request.max_tokens ?? sim.defaultMaxTokens ?? engineFor('fast').defaultMaxTokens;
  const { target, stopReason } = answerTarget(plan.conversation, plan.offset, Math.max(1, maxTokens));
  const span = scriptSpan(plan.script, plan.offset, target);
  return {
    raw: span.raw,
    reasoning: span.reasoning,
    content: span.content,
    promptTokens: plan.promptTokens,
    completionTokens: target,
    reasoningTokens: span.untilClose,
    finishReason: stopReason,
  };
}
