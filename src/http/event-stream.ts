/**
 * Server-sent event streams, for every reader of one: whether an HTTP response is one, by its
 * `content-type` (the one test the traffic path makes before it reads a body as events: the first
 * answer in reply-callbacks.ts, a continuation's answer in stream-resume.ts, the batch sender's
 * answer, so all agree on what counts as a stream), and an event's payload (the traffic path's
 * reader and the batch's assembler).
 */

/** `text/event-stream`, with or without parameters (`; charset=utf-8`). */
export function isEventStream(headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
  return String(headers['content-type'] ?? '').startsWith('text/event-stream');
}

const DATA = 'data:';

/** The event's `data:` lines joined: its payload (`[DONE]`, or JSON). */
export function eventData(event: string): string {
  let data = '';
  for (const line of event.split('\n')) {
    if (line.startsWith(DATA)) data += line.slice(line[DATA.length] === ' ' ? DATA.length + 1 : DATA.length);
  }
  return data;
}
