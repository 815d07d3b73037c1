/**
 * `POST /v1/files`' multipart body, read as a stream: the `file` part goes straight to the store
 * (never whole in memory), cut at `maxBytes`; `purpose` is read as it comes (the SDKs send it before
 * or after the file).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Busboy } from '@fastify/busboy';
import type { BatchStore } from './batch-store.js';

export interface ReceivedUpload {
  purpose: string | null;
  /** Null: the body had no `file` part. */
  file: { id: string; name: string; overLimit: boolean } | null;
}

/** Rejects on a body that is not multipart; the stored bytes are the caller's to describe or remove. */
export async function receiveUpload(
  body: Readable,
  headers: IncomingHttpHeaders,
  store: BatchStore,
  maxBytes: number,
): Promise<ReceivedUpload> {
  const parser = Busboy({
    headers: { ...headers, 'content-type': headers['content-type'] ?? '' },
    limits: { fileSize: maxBytes, files: 1, fields: 16, parts: 17 },
  });
  let purpose: string | null = null;
  let file: Promise<ReceivedUpload['file']> | null = null;
  parser.on('field', (name, value) => {
    if (name === 'purpose') purpose = value;
  });
  parser.on('file', (name, stream, filename) => {
    if (name !== 'file' || file !== null) {
      stream.resume();
      return;
    }
    file = store.writeContent(stream).then((id) => ({ id, name: filename, overLimit: stream.truncated }));
    // Awaited after the body is read. The store refused (its database is down): the rest of the
    // part is read and dropped, so the body ends and the refusal is answered.
    file.catch(() => stream.resume());
  });
  await pipeline(body, parser);
  return { purpose, file: file === null ? null : await file };
}
