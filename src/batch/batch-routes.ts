/**
 * The OpenAI Batch API on fleetgate's own URL, enough for the `openai` SDKs' `files.create`,
 * `files.retrieve`, `files.content` and `batches.create/retrieve/list/cancel` to work unchanged:
 *
 *   POST /v1/files                  multipart: file, purpose=batch   200 File object; 400; 413 over batch.max_file_size (streamed to disk)
 *   GET  /v1/files/:id              200 File object; 404
 *   GET  /v1/files/:id/content      200 the file's bytes, streamed; 404
 *   POST /v1/batches                {input_file_id, endpoint, completion_window: "24h", metadata?}  200 Batch object
 *   GET  /v1/batches                ?limit=20&after=ID  a list page, newest first
 *   GET  /v1/batches/:id            200 Batch object; 404
 *   POST /v1/batches/:id/cancel     200 Batch object (cancelling); 404; 409 already ended
 *   GET  /fleet/batches             the running jobs' progress, for the status page (no key needed: counts only)
 *
 * Registered before the traffic path, which would otherwise proxy these paths to a backend. With
 * `auth.api_keys` set, each needs one of them (or `admin.token`), as the traffic path does.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../config/types.js';
import { apiKeyGuard } from '../http/api-key-guard.js';
import { sendError } from '../http/openai-error.js';
import { type BatchJobs, BatchRequestError, type CreateParams } from './batch-jobs.js';
import type { BatchStore, FileObject } from './batch-store.js';
import { type ReceivedUpload, receiveUpload } from './upload.js';

export interface BatchRouteOptions {
  jobs: BatchJobs;
  store: BatchStore;
  /** The running config, read per request (a reload may change the keys). */
  config: () => Config;
}

type IdRoute = { Params: { id: string } };

const MAX_PAGE = 100;

/** Why an upload read whole is refused; null: it is kept. */
function uploadRefusal(
  { purpose, file }: ReceivedUpload,
  maxFileSize: number,
): { status: 400 | 413; message: string } | null {
  if (purpose !== 'batch')
    return {
      status: 400,
      message: `purpose must be 'batch' (fleetgate keeps batch files only), got ${JSON.stringify(purpose)}`,
    };
  if (file === null) return { status: 400, message: 'the multipart body has no file' };
  if (file.overLimit) return { status: 413, message: `the file is over batch.max_file_size (${maxFileSize} bytes)` };
  return null;
}

export function registerBatchRoutes(app: FastifyInstance, opts: BatchRouteOptions): void {
  const { jobs, store } = opts;
  const maxFileSize = opts.config().batch.max_file_size;
  const onRequest = apiKeyGuard(opts.config, { adminToken: true });

  const fileOr404 = (id: string, reply: FastifyReply): FileObject | null => {
    const file = store.file(id);
    if (file === null) void sendError(reply, 404, `No file found with id '${id}'`);
    return file;
  };

  const answerError = (error: unknown, reply: FastifyReply) => {
    if (error instanceof BatchRequestError) return sendError(reply, error.status, error.message);
    throw error;
  };

  app.register(async (scope) => {
    // The body stays a stream: upload.ts reads it, the file straight to disk.
    scope.addContentTypeParser('multipart/form-data', (_request, payload, done) => done(null, payload));
    scope.post('/v1/files', { onRequest }, async (request, reply) => {
      if (!(request.body instanceof Readable))
        return sendError(reply, 400, 'POST /v1/files takes multipart/form-data with a file and purpose=batch');
      let upload: ReceivedUpload;
      try {
        upload = await receiveUpload(request.body, request.headers, store, maxFileSize);
      } catch (error) {
        return sendError(reply, 400, `cannot read the multipart body: ${(error as Error).message}`);
      }
      const refusal = uploadRefusal(upload, maxFileSize);
      if (refusal !== null || upload.file === null) {
        if (upload.file !== null) store.removeContent(upload.file.id);
        return sendError(reply, refusal?.status ?? 400, refusal?.message ?? 'the multipart body has no file');
      }
      const now = Math.floor(Date.now() / 1000);
      return store.describeFile(upload.file.id, upload.file.name || 'upload.jsonl', 'batch', now);
    });
  });

  app.get<IdRoute>(
    '/v1/files/:id',
    { onRequest },
    async (request, reply) => fileOr404(request.params.id, reply) ?? reply,
  );

  app.get<IdRoute>('/v1/files/:id/content', { onRequest }, async (request, reply) => {
    const file = fileOr404(request.params.id, reply);
    if (file === null) return reply;
    return reply.type('application/octet-stream').send(store.readContent(file.id));
  });

  app.post('/v1/batches', { onRequest }, async (request, reply) => {
    try {
      return jobs.create((request.body ?? {}) as CreateParams);
    } catch (error) {
      return answerError(error, reply);
    }
  });

  app.get<{ Querystring: { limit?: string; after?: string } }>('/v1/batches', { onRequest }, async (request, reply) => {
    const limit = request.query.limit === undefined ? 20 : Number(request.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
      return sendError(reply, 400, `limit must be an integer from 1 to ${MAX_PAGE}`);
    const all = jobs.list();
    const after = request.query.after;
    const start = after === undefined ? 0 : all.findIndex((b) => b.id === after) + 1;
    const data = all.slice(start, start + limit);
    return {
      object: 'list',
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: start + limit < all.length,
    };
  });

  app.get<IdRoute>('/v1/batches/:id', { onRequest }, async (request, reply) => {
    const batch = jobs.get(request.params.id);
    return batch ?? sendError(reply, 404, `No batch found with id '${request.params.id}'`);
  });

  app.post<IdRoute>('/v1/batches/:id/cancel', { onRequest }, async (request, reply) => {
    try {
      return jobs.cancel(request.params.id);
    } catch (error) {
      return answerError(error, reply);
    }
  });

  app.get('/fleet/batches', async () => ({
    batches: jobs
      .list()
      .filter(
        (b) =>
          b.status === 'validating' ||
          b.status === 'in_progress' ||
          b.status === 'finalizing' ||
          b.status === 'cancelling',
      )
      .map((b) => ({ id: b.id, status: b.status, endpoint: b.endpoint, ...b.request_counts })),
  }));
}
