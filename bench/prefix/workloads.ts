/**
 * The prefix bench's three workloads, deterministic for a seed. Every request streams (time to
 * first token is measured) and carries an `X-Session-Id` a client wanting affinity would send: the
 * prompt's group, the conversation, or the request itself.
 * - group sampling: each prompt sent `n` times in a row (GRPO rollouts, best-of-n);
 * - multi-turn chat: conversations of 5-10 turns, each turn's prompt the whole conversation so far
 *   (the simulator's real answers included), sent after the user's pause to read and type (`thinkMs`),
 *   several conversations interleaved;
 * - unique: bench:balance's batch job (prompts that share only a common opening).
 */
import { outputText } from '../../src/sim/text-gen.js';
import { MODEL, makeWorkload, rng, type WorkloadSpec } from '../balance/workload.js';

export interface PrefixRequest {
  body: Buffer;
  session: string;
  /** A conversation's turn: how long its user reads and types after the previous answer. */
  thinkMs?: number;
}

/** Requests sent by a closed loop in order, or conversations whose turns go one after another. */
export type PrefixWorkload =
  | { kind: 'batch'; name: string; requests: PrefixRequest[] }
  | { kind: 'conversations'; name: string; conversations: PrefixRequest[][] };

const WORDS = ['river', 'bridge', 'market', 'tower', 'garden', 'harbour', 'street', 'square', 'mill', 'canal'];

export function prose(random: () => number, chars: number, tag: string): string {
  let out = `${tag}: `;
  while (out.length < chars) out += `${WORDS[Math.floor(random() * WORDS.length)]} `;
  return out.slice(0, chars);
}

function logNormal(random: () => number, median: number, sigma: number, max: number): number {
  const u = Math.max(random(), 1e-12);
  const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  return Math.max(4, Math.min(max, Math.round(median * Math.exp(sigma * z))));
}

function chatBody(messages: { role: string; content: string }[], maxTokens: number): Buffer {
  return Buffer.from(JSON.stringify({ model: MODEL, messages, max_tokens: maxTokens, temperature: 0.8, stream: true }));
}

export interface GroupSpec {
  prompts: number;
  n: number;
  seed: number;
  /** Prompt length in characters (about 4 per token), drawn uniformly from this range. */
  promptChars: [number, number];
  outputMedian: number;
  maxTokens: number;
}

export function groupSampling(spec: GroupSpec): PrefixWorkload {
  const random = rng(spec.seed);
  const requests: PrefixRequest[] = [];
  for (let p = 0; p < spec.prompts; p++) {
    const [lo, hi] = spec.promptChars;
    const problem = prose(random, lo + Math.floor(random() * (hi - lo)), `Problem ${p}`);
    for (let s = 0; s < spec.n; s++) {
      // Each sample ends on its own length: the marker is the prompt's last words, after the shared problem.
      const length = logNormal(random, spec.outputMedian, 0.7, spec.maxTokens - 1);
      const content = `${problem}\nSolve it step by step. <sim:len=${length}>`;
      requests.push({ body: chatBody([{ role: 'user', content }], spec.maxTokens), session: `group-${p}` });
    }
  }
  return { kind: 'batch', name: 'group sampling', requests };
}

export interface ConversationSpec {
  conversations: number;
  minTurns: number;
  maxTurns: number;
  seed: number;
  systemChars: number;
  userChars: [number, number];
  replyMedian: number;
  maxTokens: number;
  /** The user's pause between an answer and the next turn, drawn uniformly from this range. */
  thinkMs: [number, number];
  /** The workload's name in reports (default `multi-turn chat`). */
  name?: string;
  /**
   * Conversations per system prompt, each group's its own (inference-perf's `shared_prefix` with
   * multi-turn chat, as llm-d benchmarks precise routing: `num_prompts_per_group` users share each
   * of `num_groups` system prompts); default: all share one.
   */
  usersPerPrompt?: number;
}

export function multiTurn(spec: ConversationSpec): PrefixWorkload {
  const random = rng(spec.seed);
  const shared = { role: 'system', content: prose(random, spec.systemChars, 'You are a travel guide') };
  const users = spec.usersPerPrompt;
  const groups = Array.from({ length: users === undefined ? 0 : Math.ceil(spec.conversations / users) }, (_, g) => ({
    role: 'system',
    content: prose(rng(spec.seed * 1000 + g), spec.systemChars, `You are travel guide ${g}`),
  }));
  const conversations: PrefixRequest[][] = [];
  for (let c = 0; c < spec.conversations; c++) {
    const turns = spec.minTurns + Math.floor(random() * (spec.maxTurns - spec.minTurns + 1));
    const messages = [users === undefined ? shared : groups[Math.floor(c / users)]];
    const requests: PrefixRequest[] = [];
    for (let t = 0; t < turns; t++) {
      const [lo, hi] = spec.userChars;
      const reply = logNormal(random, spec.replyMedian, 0.6, spec.maxTokens - 1);
      const user = `${prose(random, lo + Math.floor(random() * (hi - lo)), `Conversation ${c} turn ${t}`)} <sim:len=${reply}>`;
      messages.push({ role: 'user', content: user });
      const [minThink, maxThink] = spec.thinkMs;
      const thinkMs = t === 0 ? 0 : minThink + random() * (maxThink - minThink);
      requests.push({ body: chatBody(messages, spec.maxTokens), session: `conversation-${c}`, thinkMs });
      // The simulator answers exactly this text; the next turn sends it back as the assistant's message.
      messages.push({ role: 'assistant', content: outputText(reply) });
    }
    conversations.push(requests);
  }
  return { kind: 'conversations', name: spec.name ?? 'multi-turn chat', conversations };
}

export function uniquePrompts(spec: WorkloadSpec): PrefixWorkload {
  const requests = makeWorkload(spec).map((job) => {
    const body = JSON.parse(job.body.toString()) as Record<string, unknown>;
    return { body: Buffer.from(JSON.stringify({ ...body, stream: true })), session: `request-${job.index}` };
  });
  return { kind: 'batch', name: 'unique prompts', requests };
}
