/**
 * The OpenAI Batch API on fleetgate's own URL, enough for the `openai` SDKs' `files.create`,
 * `files.retrieve`, `files.content`, `files.delete` and `batches.create/retrieve/list/cancel` to work unchanged:
 *
 *   POST /v1/files                  multipart: file, purpose=batch   200 File object; 400; 413 over batch.max_file_size (streamed to disk)
 *   GET  /v1/files/:id              200 File object; 404
 *   GET  /v1/files/:id/content      200 the file's bytes, streamed; 404
 *   DELETE /v1/files/:id            200 {id, object: "file", deleted: true}; 404; 409 the input of a job not yet ended
 *   POST /v1/batches                {input_file_id, endpoint, completion_window: "24h", metadata?}  200 Batch object
 *   GET  /v1/batches                ?limit=20&after=ID  a list page, newest first
 *   GET  /v1/batches/:id            200 Batch object; 404
 *   POST /v1/batches/:id/cancel     200 Batch object (cancelling); 404; 409 already ended
 *   GET  /fleet/batches             the running jobs' progress, for the status page (no key needed: counts only)
 *
 * Registered before the traffic path, which would otherwise proxy these paths to a backend. With
 * `auth.api_keys` set, each needs one of them (or `admin.token`), as the traffic path does. A store
 * that cannot be reached (the database is down) is a 503 naming why; so is `refusal`, when set.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/types.js';
import { apiKeyGuard } from '../http/api-key-guard.js';
import { sendError } from '../http/openai-error.js';
import { type BatchJobs, BatchRequestError, type CreateParams } from './batch-jobs.js';
import { type BatchStore, type FileObject, StoreUnavailableError } from './batch-store.js';
import { type ReceivedUpload, receiveUpload } from './upload.js';

export interface BatchRouteOptions {
  jobs: BatchJobs;
  store: BatchStore;
  /** The running config, read per request (a reload may change the keys). */
  config: () => Config;
  /** Set: every endpoint answers 503 with it (the Batch API cannot work in this setup). */
  refusal: string | null;
}

type IdRoute = { Params: { id: string } };
type ListRoute = { Querystring: { limit?: string; after?: string } };
type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

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

/** The handler's answer; a request error or an unreachable store as its error answer. */
function answer<R extends FastifyRequest>(handler: (request: R, reply: FastifyReply) => Promise<unknown>) {
  return async (request: R, reply: FastifyReply) => {
    try {
      return await handler(request, reply);
    } catch (error) {
      if (error instanceof BatchRequestError) return sendError(reply, error.status, error.message);
      if (error instanceof StoreUnavailableError) return sendError(reply, 503, error.message);
      throw error;
    }
  };
}

export function registerBatchRoutes(app: FastifyInstance, opts: BatchRouteOptions): void {
  const { refusal } = opts;
  const guard = apiKeyGuard(opts.config, { adminToken: true });
  const onRequest: Hook = async (request, reply) =>
    refusal === null ? guard(request, reply) : sendError(reply, 503, refusal);
  registerFileRoutes(app, opts, onRequest);
  registerJobRoutes(app, opts, onRequest);
  app.get('/fleet/batches', async () => ({
    batches: (refusal === null ? (await opts.jobs.list(MAX_PAGE).catch(() => ({ data: [] }))).data : [])
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

/** `/v1/files`: uploads streamed to the store, a file's object and its content streamed back. */
function registerFileRoutes(app: FastifyInstance, { store, config }: BatchRouteOptions, onRequest: Hook): void {
  const maxFileSize = config().batch.max_file_size;
  const fileOr404 = async (id: string, reply: FastifyReply): Promise<FileObject | null> => {
    const file = await store.file(id);
    if (file === null) void sendError(reply, 404, `No file found with id '${id}'`);
    return file;
  };

  app.register(async (scope) => {
    // The body stays a stream: upload.ts reads it, the file straight to the store.
    scope.addContentTypeParser('multipart/form-data', (_request, payload, done) => done(null, payload));
    scope.post(
      '/v1/files',
      { onRequest, config: { body: { type: 'multipart/form-data', fields: ['file', 'purpose=batch'] } } },
      answer(async (request, reply) => {
        if (!(request.body instanceof Readable))
          return sendError(reply, 400, 'POST /v1/files takes multipart/form-data with a file and purpose=batch');
        let upload: ReceivedUpload;
        try {
          upload = await receiveUpload(request.body, request.headers, store, maxFileSize);
        } catch (error) {
          if (error instanceof StoreUnavailableError) throw error;
          return sendError(reply, 400, `cannot read the multipart body: ${(error as Error).message}`);
        }
        const refused = uploadRefusal(upload, maxFileSize);
        const { file } = upload;
        if (refused !== null || file === null) {
          if (file !== null) await store.removeContent(file.id);
          return sendError(reply, refused?.status ?? 400, refused?.message ?? 'the multipart body has no file');
        }
        return store.describeFile(file.id, file.name || 'upload.jsonl', 'batch', Math.floor(Date.now() / 1000));
      }),
    );
  });

  app.get<IdRoute>(
    '/v1/files/:id',
    { onRequest },
    answer(async (request: FastifyRequest<IdRoute>, reply) => (await fileOr404(request.params.id, reply)) ?? reply),
  );

  app.get<IdRoute>(
    '/v1/files/:id/content',
    { onRequest },
    answer(async (request: FastifyRequest<IdRoute>, reply) => {
      const file = await fileOr404(request.params.id, reply);
      if (file === null) return reply;
      return reply.type('application/octet-stream').send(store.readContent(file.id));
    }),
  );

  app.delete<IdRoute>(
    '/v1/files/:id',
    { onRequest },
    answer(async (request: FastifyRequest<IdRoute>, reply) => {
      const { id } = request.params;
      const outcome = await store.deleteFile(id);
      if (outcome === 'missing') return sendError(reply, 404, `No file found with id '${id}'`);
      if (outcome === 'in-use')
        return sendError(
          reply,
          409,
          `file ${id} is the input of a batch job not yet ended: cancel it or let it end first`,
        );
      return { id, object: 'file', deleted: true };
    }),
  );
}

/** `/v1/batches`: create, list, retrieve and cancel jobs. */
function registerJobRoutes(app: FastifyInstance, { jobs }: BatchRouteOptions, onRequest: Hook): void {
  app.post(
    '/v1/batches',
    {
      onRequest,
      config: { body: { type: 'application/json', fields: ['input_file_id', 'endpoint', 'completion_window'] } },
    },
    answer(async (request) => jobs.create((request.body ?? {}) as CreateParams)),
  );

  app.get<ListRoute>(
    '/v1/batches',
    { onRequest },
    answer(async (request: FastifyRequest<ListRoute>, reply) => {
      const limit = request.query.limit === undefined ? 20 : Number(request.query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
        return sendError(reply, 400, `limit must be an integer from 1 to ${MAX_PAGE}`);
      const { data, has_more } = await jobs.list(limit, request.query.after);
      return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more };
    }),
  );

  app.get<IdRoute>(
    '/v1/batches/:id',
    { onRequest },
    answer(async (request: FastifyRequest<IdRoute>, reply) => {
      const batch = await jobs.get(request.params.id);
      return batch ?? sendError(reply, 404, `No batch found with id '${request.params.id}'`);
    }),
  );

  app.post<IdRoute>(
    '/v1/batches/:id/cancel',
    { onRequest },
    answer(async (request: FastifyRequest<IdRoute>) => jobs.cancel(request.params.id)),
  );
}
