/**
 * Admin mutations of the fleet:
 *
 *   POST   /fleet/backends               {url, name?, kind?, log?}  201 the backend's status; 400 bad body; 409 name or URL taken
 *   DELETE /fleet/backends/:name         202 draining, removed once its in-flight requests finish; 404; 409 discovered by DNS
 *   POST   /fleet/backends/:name/drain   200 no new requests, in-flight ones finish; 404
 *   POST   /fleet/backends/:name/resume  200 back through the readiness gate; 404; 409 being removed
 *   POST   /fleet/backends/:name/restart 200 its engine is stopped and started again now; 404; 409 not launched by fleetgate
 *   POST   /fleet/reload                 200 {added, removed, changed, unchanged, applied, restart_required};
 *                                        400 invalid config (the running one stays); 409 name clash
 *   any other /fleet/... path or method  404 (never proxied)
 *
 * Every one needs admin rights (`admin-auth.ts`: 401/403) and is logged with who and what.
 * Errors are OpenAI-style `{"error": {"message", "type", "code"}}`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConfigError } from '../config/errors.js';
import { BACKEND_KINDS } from '../config/types.js';
import { validateBackend } from '../config/validate.js';
import { BackendConflictError } from '../fleet/backend-sync.js';
import type { Backend } from '../fleet/registry.js';
import { errorBody } from '../proxy/error-body.js';
import type { Gateway, GatewayOptions } from '../proxy/gateway.js';
import { peerAddress, requireAdmin } from './admin-auth.js';
import { backendStatus } from './fleet-summary.js';
import { reloadGateway } from './reload.js';

/** Shape only; URL rules, names and did-you-mean for unknown keys come from `validateBackend`. */
const addBackendSchema = {
  body: {
    type: 'object',
    required: ['url'],
    properties: {
      url: { type: 'string', minLength: 1 },
      name: { type: ['string', 'null'], minLength: 1 },
      kind: { type: ['string', 'null'], enum: [...BACKEND_KINDS, null] },
      log: { type: ['string', 'null'], minLength: 1 },
    },
  },
} as const;

const nameParams = {
  params: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1 } } },
} as const;

type Named = FastifyRequest<{ Params: { name: string } }>;

function fail(reply: FastifyReply, status: number, message: string, type: string) {
  return reply
    .code(status)
    .type('application/json')
    .send(errorBody(message, type, status));
}

export async function registerAdminApi(app: FastifyInstance, gateway: Gateway, opts: GatewayOptions): Promise<void> {
  const { fleet } = gateway;
  const registry = fleet.registry;
  const onRequest = requireAdmin(() => gateway.config.admin.token);

  const audit = (request: FastifyRequest, action: string, details: Record<string, unknown>) => {
    request.log.info({ admin: { from: peerAddress(request), action, ...details } }, `admin: ${action}`);
  };

  const find = (request: Named, reply: FastifyReply): Backend | null => {
    const backend = registry.get(request.params.name);
    if (backend === undefined) {
      void fail(reply, 404, `no backend named "${request.params.name}"`, 'not_found_error');
      return null;
    }
    return backend;
  };

  app.post('/fleet/backends', { schema: addBackendSchema, onRequest }, async (request, reply) => {
    let config: ReturnType<typeof validateBackend>;
    try {
      config = validateBackend(request.body, gateway.config.kind, 'body');
    } catch (error) {
      if (error instanceof ConfigError) return fail(reply, 400, error.message, 'invalid_request_error');
      throw error;
    }
    const conflict = fleet.configured.conflict(config);
    if (conflict !== null) return fail(reply, 409, conflict, 'conflict_error');
    const backend = fleet.add(config);
    audit(request, `add backend ${config.name}`, {
      backend: config.name,
      url: config.url,
      kind: config.kind,
      log: config.log,
    });
    return reply.code(201).send(backendStatus(backend));
  });

  app.delete('/fleet/backends/:name', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = find(request, reply);
    if (backend === null) return reply;
    if (!backend.removing && !fleet.configured.owns(backend.name)) {
      const message = `backend "${backend.name}" was discovered by DNS: remove its record, or drain it`;
      return fail(reply, 409, message, 'conflict_error');
    }
    fleet.configured.remove(backend.name);
    audit(request, `remove backend ${backend.name}`, { backend: backend.name, inflight: backend.inflight });
    return reply.code(202).send({ ...backendStatus(backend), removed: registry.get(backend.name) !== backend });
  });

  app.post('/fleet/backends/:name/drain', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = find(request, reply);
    if (backend === null) return reply;
    registry.apply(backend, { type: 'drain' });
    audit(request, `drain backend ${backend.name}`, { backend: backend.name, inflight: backend.inflight });
    return backendStatus(backend);
  });

  app.post('/fleet/backends/:name/resume', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = find(request, reply);
    if (backend === null) return reply;
    if (backend.removing) return fail(reply, 409, `backend "${backend.name}" is being removed`, 'conflict_error');
    registry.apply(backend, { type: 'resume' });
    audit(request, `resume backend ${backend.name}`, { backend: backend.name });
    return backendStatus(backend);
  });

  app.post('/fleet/backends/:name/restart', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = find(request, reply);
    if (backend === null) return reply;
    const supervisor = gateway.launcher?.get(backend.name);
    if (supervisor === undefined) {
      const message = `backend "${backend.name}" was not started by fleetgate launch: restart it where it runs`;
      return fail(reply, 409, message, 'conflict_error');
    }
    supervisor.restart();
    audit(request, `restart backend ${backend.name}`, { backend: backend.name, inflight: backend.inflight });
    return backendStatus(backend);
  });

  // `/fleet/...` is fleetgate's own namespace: an unknown path or method there is never proxied.
  app.all('/fleet/*', async (request, reply) =>
    fail(reply, 404, `${request.method} ${request.url.split('?')[0]} is not a fleetgate endpoint`, 'not_found_error'),
  );

  app.post('/fleet/reload', { onRequest }, async (request, reply) => {
    if (opts.reloadConfig === undefined) {
      return fail(reply, 501, 'reload is not available: fleetgate was not started from a config', 'server_error');
    }
    let result: ReturnType<typeof reloadGateway>;
    try {
      result = reloadGateway(gateway, opts.reloadConfig());
    } catch (error) {
      if (error instanceof ConfigError) {
        const message = `config rejected, the running config stays: ${error.message}${error.source ? ` (${error.source})` : ''}`;
        request.log.warn(
          { admin: { from: peerAddress(request), action: 'reload' } },
          `admin: reload refused: ${message}`,
        );
        return fail(reply, 400, message, 'invalid_request_error');
      }
      if (error instanceof BackendConflictError) {
        return fail(reply, 409, `config rejected, the running config stays: ${error.message}`, 'conflict_error');
      }
      throw error;
    }
    audit(request, 'reload', { ...result });
    return result;
  });
}
