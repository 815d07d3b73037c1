/**
 * Whether an HTTP response is a server-sent event stream, by its `content-type`: the one test the
 * traffic path makes before it reads a body as events (the first answer in reply-callbacks.ts, a
 * continuation's answer in stream-resume.ts), so both agree on what counts as a stream.
 */

/** `text/event-stream`, with or without parameters (`; charset=utf-8`). */
export function isEventStream(headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
  return String(headers['content-type'] ?? '').startsWith('text/event-stream');
}
