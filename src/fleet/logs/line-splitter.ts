/**
 * Turns appended log text into lines, the way a terminal would show each state: `\n`, `\r\n` and
 * a lone `\r` each end a line, so every tqdm redraw is a line of its own. Empty lines are dropped.
 */

const MAX_LINE_LENGTH = 64 * 1024;

export class LineSplitter {
  readonly #maxLength: number;
  #partial = '';
  /** How much of `#partial` was already handed out as a redraw (see `push`). */
  #emittedLength = 0;
  /** The text being collected started right after a `\r`: it is a progress-bar redraw. */
  #afterCarriageReturn = false;
  /** The line outgrew the cap; the rest of it is dropped until its end. */
  #discarding = false;

  constructor(maxLength = MAX_LINE_LENGTH) {
    this.#maxLength = maxLength;
  }

  /**
   * Returns the lines that `text` completes. A trailing partial line that follows a `\r` is
   * returned at once: tqdm writes `\r` + bar and flushes, so the latest bar state never ends with
   * a break until the next redraw, and a stalled load would otherwise hide its last progress. If
   * more text extends that line later, the whole line is returned again when it ends.
   */
  push(text: string): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const char = text.charCodeAt(i);
      if (char !== 10 && char !== 13) continue;
      this.#append(text.slice(start, i), lines);
      this.#endLine(lines);
      // `\r\n` ends one line: the `\n` then ends an empty one, which is dropped.
      this.#afterCarriageReturn = char === 13;
      start = i + 1;
    }
    this.#append(text.slice(start), lines);
    if (this.#afterCarriageReturn && this.#partial.length > this.#emittedLength) {
      lines.push(this.#partial);
      this.#emittedLength = this.#partial.length;
    }
    return lines;
  }

  /** Forget any partial line (the file was truncated or replaced). */
  reset(): void {
    this.#partial = '';
    this.#emittedLength = 0;
    this.#afterCarriageReturn = false;
    this.#discarding = false;
  }

  #append(piece: string, lines: string[]): void {
    if (this.#discarding || piece === '') return;
    this.#partial += piece;
    if (this.#partial.length <= this.#maxLength) return;
    lines.push(this.#partial.slice(0, this.#maxLength));
    this.#partial = '';
    this.#emittedLength = 0;
    this.#discarding = true;
  }

  #endLine(lines: string[]): void {
    if (this.#partial.length > this.#emittedLength) lines.push(this.#partial);
    this.#partial = '';
    this.#emittedLength = 0;
    this.#discarding = false;
  }
}
