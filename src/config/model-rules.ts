/**
 * The `model` section: where fleetgate finds the tokenizer and chat template of the model the
 * engines serve (token-exact stream resume, docs/stream-resume.md). `dir: auto` takes the
 * `--model-path` (or `--model`) of `launch.command` when it names a local directory holding a
 * `tokenizer.json`; a hub id, or no launch, leaves fleetgate without a model, as before. A
 * directory given by hand must hold one: a wrong path is refused naming the key.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fail, mapOf, nullable, type Rule, section, text } from './rules.js';
import type { LaunchConfig, ModelConfig } from './types.js';

const AUTO_MODEL_DIR = 'auto';

function modelDir(value: string, key: string): void {
  if (value === AUTO_MODEL_DIR) return;
  if (!existsSync(join(value, 'tokenizer.json')))
    fail(key, `${JSON.stringify(value)} holds no tokenizer.json (a Hugging Face model directory, or "auto", or null)`);
}

export const modelRule: Rule<{ dir: string | null; dirs: Record<string, string> }> = section({
  dir: { ...nullable(text(undefined, modelDir)), fallback: () => AUTO_MODEL_DIR },
  dirs: mapOf(text(undefined, modelDir)),
});

const MODEL_FLAGS = ['--model-path', '--model'];

/** The local model directory a launched engine loads, when its command names one. */
function launchedModelDir(launch: LaunchConfig | null): string | null {
  const argv = launch?.engines[0]?.argv ?? [];
  for (let i = 0; i < argv.length; i++) {
    const flag = MODEL_FLAGS.find((name) => argv[i] === name || argv[i].startsWith(`${name}=`));
    if (flag === undefined) continue;
    const value = argv[i] === flag ? argv[i + 1] : argv[i].slice(flag.length + 1);
    if (value !== undefined && existsSync(join(value, 'tokenizer.json'))) return resolve(value);
  }
  return null;
}

/** The section with `auto` resolved: a directory, or null. */
export function resolveModel(
  model: { dir: string | null; dirs: Record<string, string> },
  launch: LaunchConfig | null,
): ModelConfig {
  const dir = model.dir === AUTO_MODEL_DIR ? launchedModelDir(launch) : model.dir;
  return { dir: dir === null ? null : resolve(dir), dirs: model.dirs };
}
