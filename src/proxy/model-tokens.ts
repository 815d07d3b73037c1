/**
 * The `model` section made usable: each configured model directory loaded once at start-up (its
 * tokenizer takes about a second to build), and the settings token-exact resume reads, which model
 * a request's body names and which raw API a backend speaks. No model configured: none, and every
 * stream resumes as text, as before.
 */
import { ConfigError } from '../config/errors.js';
import type { BackendKind, ModelConfig } from '../config/types.js';
import { type ChatModel, loadChatModel, ModelFilesError } from '../model/chat-model.js';
import type { TokenResumeSettings } from './stream-resume.js';

function load(dir: string, key: string): ChatModel {
  try {
    return loadChatModel(dir);
  } catch (error) {
    if (error instanceof ModelFilesError) throw new ConfigError(key, error.message);
    throw error;
  }
}

/** Token-exact resume's settings for `model`, or undefined when no model directory is known. */
export function tokenResumeFrom(
  model: ModelConfig,
  kindOf: (backend: string) => BackendKind,
): TokenResumeSettings | undefined {
  const named = new Map(Object.entries(model.dirs).map(([name, dir]) => [name, load(dir, `model.dirs.${name}`)]));
  const single = model.dir === null ? null : load(model.dir, 'model.dir');
  if (single === null && named.size === 0) return undefined;
  return {
    modelFor: (body) => (typeof body.model === 'string' ? named.get(body.model) : undefined) ?? single,
    kindOf,
  };
}
