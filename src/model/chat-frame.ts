/**
 * How a model's chat template wraps each message, found by probing it with marker messages (issue
 * #55): `<|im_start|>user\n` ... `<|im_end|>\n` for ChatML. Where the template is a plain
 * concatenation whose message boundaries are special tokens, tokenizing message by message gives
 * exactly the whole prompt's ids, so a conversation's messages can be tokenized once each and
 * cached (proxy/kv-request-blocks.ts). Pure, given the model.
 */
import type { ChatModel } from './chat-model.js';

type Body = Record<string, unknown>;

export interface Frame {
  /** Text before a message's content, by role. */
  readonly open: ReadonlyMap<string, string>;
  /** Text after every message's content. */
  readonly close: string;
  /** Token ids of the assistant opening a request for a new answer ends with. */
  readonly generation: readonly number[];
  /** Token ids of `close`. */
  readonly closeIds: readonly number[];
  /** The token ids an assistant message in the history opens with that the generation prompt opens with too. */
  readonly answerOpen: readonly number[];
}

const MARK = ['\u0001a\u0001', '\u0001b\u0001', '\u0001c\u0001', '\u0001d\u0001', '\u0001e\u0001'];
const ROLES = ['system', 'user', 'assistant', 'user', 'assistant'];

/** How the template wraps messages, or null when it is not a plain concatenation the cache can use. */
export function probe(model: ChatModel): Frame | null {
  try {
    const messages = ROLES.map((role, i) => ({ role, content: MARK[i] }));
    messages.push({ role: 'user', content: '\u0001f\u0001' });
    const text = model.render(messages, { addGenerationPrompt: true });
    const pieces: string[] = [];
    let at = 0;
    for (const mark of [...MARK, '\u0001f\u0001']) {
      const next = text.indexOf(mark, at);
      if (next < 0) return null;
      pieces.push(text.slice(at, next));
      at = next + mark.length;
    }
    const tail = text.slice(at);
    // pieces[i] = close (of message i - 1) + open(role i); the close is what ends a lone message.
    const lone = model.render([{ role: 'system', content: MARK[0] }], { addGenerationPrompt: false });
    const close = lone.slice(lone.indexOf(MARK[0]) + MARK[0].length);
    if (close === '' || ![...pieces.slice(1), tail].every((piece) => piece.startsWith(close))) return null;
    const open = new Map<string, string>([['system', pieces[0]]]);
    for (let i = 1; i < pieces.length; i++) {
      const role = i < ROLES.length ? ROLES[i] : 'user';
      const own = pieces[i].slice(close.length);
      if (open.has(role) && open.get(role) !== own) return null;
      open.set(role, own);
    }
    const generation = model.encode(tail.slice(close.length));
    const assistantOpen = model.encode(open.get('assistant') ?? '');
    let shared = 0;
    while (shared < generation.length && generation[shared] === assistantOpen[shared]) shared++;
    const frame: Frame = {
      open,
      close,
      generation,
      closeIds: model.encode(close),
      answerOpen: generation.slice(0, shared),
    };
    // The cache's premise, checked on a conversation without a system message: the whole prompt's
    // ids are the messages' ids one after the other.
    const check = [
      { role: 'user', content: 'Hello there, how are you?' },
      { role: 'assistant', content: 'Fine, thanks.\n\nAnd you?' },
      { role: 'user', content: '  Two spaces, then text.' },
    ];
    const whole = model.encode(model.render(check, { addGenerationPrompt: true }));
    const parts = [...check.flatMap((m) => model.encode(messageText(frame, m.role, m.content))), ...frame.generation];
    return whole.length === parts.length && whole.every((id, i) => id === parts[i]) ? frame : null;
  } catch {
    return null;
  }
}

export function messageText(frame: Frame, role: string, content: string): string {
  return `${frame.open.get(role) ?? ''}${content}${frame.close}`;
}

/** A chat the probe's frame covers: text messages of known roles, no tools or kwargs, the user's last. */
export function plainChat(frame: Frame, body: Body): Array<{ role: string; content: string }> | null {
  if (body.tools !== undefined || body.chat_template_kwargs !== undefined) return null;
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return null;
  for (const m of messages as Body[]) {
    if (typeof m?.content !== 'string' || typeof m.role !== 'string' || !frame.open.has(m.role)) return null;
    if (m.tool_calls !== undefined || m.reasoning_content !== undefined || m.content.includes('<think>')) return null;
  }
  if ((messages[messages.length - 1] as Body).role !== 'user') return null;
  return messages as Array<{ role: string; content: string }>;
}
