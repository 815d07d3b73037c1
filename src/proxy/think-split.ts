/**
 * Splits a model's raw output (think markers inline, as SGLang's `/generate` and vLLM's completions
 * return it) into reasoning and answer at the model's markers, as the engines' reasoning parsers do
 * for a chat stream: the markers themselves go to neither side. Pure, incremental: a marker cut
 * across two pieces is held back until it is whole.
 */
import type { ThinkMarkers } from '../model/chat-model.js';

export interface SplitText {
  reasoning: string;
  content: string;
}

export class ThinkSplitter {
  readonly #markers: ThinkMarkers;
  #inThink: boolean;
  #held = '';

  /** `inThink`: the text so far ends inside an open think block. */
  constructor(markers: ThinkMarkers, inThink: boolean) {
    this.#markers = markers;
    this.#inThink = inThink;
  }

  push(piece: string): SplitText {
    const out: SplitText = { reasoning: '', content: '' };
    let text = this.#held + piece;
    this.#held = '';
    for (;;) {
      const marker = this.#inThink ? this.#markers.end : this.#markers.start;
      const at = text.indexOf(marker);
      if (at < 0) break;
      this.#emit(out, text.slice(0, at));
      text = text.slice(at + marker.length);
      this.#inThink = !this.#inThink;
    }
    const partial = partialMarkerAt(text, this.#inThink ? this.#markers.end : this.#markers.start);
    this.#held = text.slice(partial);
    this.#emit(out, text.slice(0, partial));
    return out;
  }

  /** The end of the output: whatever was held back is text after all. */
  flush(): SplitText {
    const out: SplitText = { reasoning: '', content: '' };
    this.#emit(out, this.#held);
    this.#held = '';
    return out;
  }

  #emit(out: SplitText, text: string): void {
    if (this.#inThink) out.reasoning += text;
    else out.content += text;
  }
}

/** Where a trailing prefix of `marker` starts in `text` (`text.length` when there is none). */
function partialMarkerAt(text: string, marker: string): number {
  for (let length = Math.min(marker.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(marker.slice(0, length))) return text.length - length;
  }
  return text.length;
}

/** The rendered prompt leaves a think block open (a template that starts the reasoning itself). */
export function opensThink(rendered: string, markers: ThinkMarkers): boolean {
  return rendered.lastIndexOf(markers.start) > rendered.lastIndexOf(markers.end);
}

/**
 * What the model generated, as raw text, given what its parser streamed: the reasoning between the
 * markers (the start marker only where the prompt did not open the block itself), then the answer
 * after the end marker once it began.
 */
export function generatedRaw(
  markers: ThinkMarkers,
  promptOpensThink: boolean,
  reasoning: string,
  content: string,
): string {
  if (reasoning === '' && !promptOpensThink) return content;
  const opened = promptOpensThink ? reasoning : markers.start + reasoning;
  return content === '' ? opened : opened + markers.end + content;
}
