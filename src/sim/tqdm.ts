/**
 * tqdm's text, as written to a non-terminal (10-character bar). Follows `tqdm.format_meter`:
 * `format_interval`, `{rate:5.2f}it/s` or `s/it` when slower than 1 it/s, `?` before the first step.
 */

const BAR_WIDTH = 10;
/** tqdm's unicode charset: ' ' then 1/8 .. 7/8 blocks, then the full block. */
const BAR_CHARS = ' ▏▎▍▌▋▊▉█';

function formatInterval(seconds: number): string {
  const total = Math.max(0, Math.trunc(seconds));
  const s = total % 60;
  const minutes = Math.trunc(total / 60);
  const m = minutes % 60;
  const h = Math.trunc(minutes / 60);
  const two = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${two(m)}:${two(s)}` : `${two(m)}:${two(s)}`;
}

function pad5(value: number): string {
  return value.toFixed(2).padStart(5, ' ');
}

export interface MeterState {
  n: number;
  total: number;
  elapsedSeconds: number;
}

/** `[00:16<00:06,  6.78it/s]` */
function meterTail({ n, total, elapsedSeconds }: MeterState): string {
  const rate = n > 0 && elapsedSeconds > 0 ? n / elapsedSeconds : null;
  const elapsed = formatInterval(elapsedSeconds);
  if (rate === null) return `[${elapsed}<?, ?it/s]`;
  const remaining = formatInterval((total - n) / rate);
  const rateText = rate < 1 ? `${pad5(1 / rate)}s/it` : `${pad5(rate)}it/s`;
  return `[${elapsed}<${remaining}, ${rateText}]`;
}

function percent(n: number, total: number): string {
  const value = total > 0 ? Math.round((100 * n) / total) : 0;
  return String(value).padStart(3, ' ');
}

/** `████      ` for 40 % */
function barGlyphs(n: number, total: number): string {
  const frac = total > 0 ? Math.min(1, n / total) : 0;
  const nsyms = BAR_CHARS.length - 1;
  const units = Math.trunc(frac * BAR_WIDTH * nsyms);
  const full = Math.trunc(units / nsyms);
  const part = units % nsyms;
  if (full >= BAR_WIDTH) return BAR_CHARS[nsyms].repeat(BAR_WIDTH);
  return BAR_CHARS[nsyms].repeat(full) + BAR_CHARS[part] + ' '.repeat(BAR_WIDTH - full - 1);
}

/** SGLang's weight bar: `Loading safetensors checkpoint shards:  72% Completed | 113/158 [00:16<00:06,  6.78it/s]` */
export function completedMeter(desc: string, state: MeterState): string {
  return `${desc}: ${percent(state.n, state.total)}% Completed | ${state.n}/${state.total} ${meterTail(state)}`;
}

/** Standard bar: `Capturing batches (bs=512 avail_mem=3.10 GB):  40%|████      | 21/52 [00:04<00:06,  4.90it/s]` */
export function standardMeter(desc: string, state: MeterState): string {
  return `${desc}: ${percent(state.n, state.total)}%|${barGlyphs(state.n, state.total)}| ${state.n}/${state.total} ${meterTail(state)}`;
}
