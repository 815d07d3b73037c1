/**
 * Admin mutations of the fleet:
 *
 *   POST   /fleet/backends               {url, name?, kind?, log?}  201 the backend's status; 400 bad body; 409 name or URL taken
 *   DELETE /fleet/backends/:name         202 draining, removed once its in-flight requests finish; 404; 409 discovered by DNS
 *   POST   /fleet/backends/:name/drain   200 no new requests, in-flight ones finish; 404
 *                                        both: in-flight requests still running after the drain deadline
 *                                        (`?deadline=10s` or `{"deadline": "10s"}`, else `health.drain_deadline`;
 *                                        0 = none) are ended, to resume or be re-sent elsewhere; 400 bad deadline
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
import { formatDuration } from '../config/duration.js';
import { ConfigError } from '../config/errors.js';
import { BACKEND_KINDS } from '../config/types.js';
import { validateBackend } from '../config/validate.js';
import type { Backend } from '../fleet/registry.js';
import { sendError } from '../http/openai-error.js';
import { peerAddress, requireAdmin } from './admin-auth.js';
import type { ControlPlane } from './control-plane.js';
import { deadlineParam } from './drain-deadline-param.js';
import { backendStatus } from './fleet-summary.js';

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
type Drained = FastifyRequest<{ Params: { name: string }; Querystring: unknown; Body: unknown }>;

export async function registerAdminApi(app: FastifyInstance, control: ControlPlane): Promise<void> {
  const admin = new AdminCalls(control);
  registerAddBackend(app, admin);
  registerRemoveBackend(app, admin);
  registerDrain(app, admin);
  registerResumeAndRestart(app, admin);
  registerReload(app, admin);
  // `/fleet/...` is fleetgate's own namespace: an unknown path or method there is never proxied.
  app.all('/fleet/*', async (request, reply) =>
    sendError(reply, 404, `${request.method} ${request.url.split('?')[0]} is not a fleetgate endpoint`),
  );
}

/** What every admin call shares: the rights check, the audit line, the backend it names. */
class AdminCalls {
  readonly control: ControlPlane;
  readonly onRequest: ReturnType<typeof requireAdmin>;

  constructor(control: ControlPlane) {
    this.control = control;
    this.onRequest = requireAdmin(() => control.config.admin.token);
  }

  get fleet() {
    return this.control.fleet;
  }

  audit(request: FastifyRequest, action: string, details: Record<string, unknown>): void {
    request.log.info({ admin: { from: peerAddress(request), action, ...details } }, `admin: ${action}`);
  }

  /** The backend the path names; else a 404 is sent and null returned. */
  find(request: Named, reply: FastifyReply): Backend | null {
    const backend = this.fleet.registry.get(request.params.name);
    if (backend === undefined) {
      void sendError(reply, 404, `no backend named "${request.params.name}"`);
      return null;
    }
    return backend;
  }

  /** The call's own deadline for a backend now draining; the answer's `drain_deadline`. */
  applyDeadline(backend: Backend, ms: number | null): string | null {
    if (this.fleet.registry.get(backend.name) !== backend) return null;
    if (ms !== null) this.fleet.drains.set(backend, ms);
    const set = this.fleet.drains.deadlineOf(backend);
    return set === null || set === 0 ? null : formatDuration(set);
  }
}

function registerAddBackend(app: FastifyInstance, admin: AdminCalls): void {
  const { fleet, onRequest } = admin;
  app.post('/fleet/backends', { schema: addBackendSchema, onRequest }, async (request, reply) => {
    let config: ReturnType<typeof validateBackend>;
    try {
      config = validateBackend(request.body, admin.control.config.kind, 'body');
    } catch (error) {
      if (error instanceof ConfigError) return sendError(reply, 400, error.message);
      throw error;
    }
    const conflict = fleet.configured.conflict(config);
    if (conflict !== null) return sendError(reply, 409, conflict);
    const backend = fleet.add(config);
    const { name, url, kind, log } = config;
    admin.audit(request, `add backend ${name}`, { backend: name, url, kind, log });
    return reply.code(201).send(backendStatus(backend));
  });
}

function registerRemoveBackend(app: FastifyInstance, admin: AdminCalls): void {
  const { fleet, onRequest } = admin;
  app.delete('/fleet/backends/:name', { schema: nameParams, onRequest }, async (request: Drained, reply) => {
    const backend = admin.find(request, reply);
    if (backend === null) return reply;
    if (!backend.removing && !fleet.configured.owns(backend.name)) {
      const message = `backend "${backend.name}" was discovered by DNS: remove its record, or drain it`;
      return sendError(reply, 409, message);
    }
    const deadline = deadlineParam(request.query, request.body);
    if (!deadline.ok) return sendError(reply, 400, deadline.message);
    fleet.configured.remove(backend.name);
    const drainDeadline = admin.applyDeadline(backend, deadline.ms);
    admin.audit(request, `remove backend ${backend.name}`, {
      backend: backend.name,
      inflight: backend.inflight,
      drain_deadline: drainDeadline,
    });
    return reply.code(202).send({
      ...backendStatus(backend),
      removed: fleet.registry.get(backend.name) !== backend,
      drain_deadline: drainDeadline,
    });
  });
}

function registerDrain(app: FastifyInstance, admin: AdminCalls): void {
  app.post(
    '/fleet/backends/:name/drain',
    { schema: nameParams, onRequest: admin.onRequest },
    async (request: Drained, reply) => {
      const backend = admin.find(request, reply);
      if (backend === null) return reply;
      const deadline = deadlineParam(request.query, request.body);
      if (!deadline.ok) return sendError(reply, 400, deadline.message);
      admin.fleet.registry.apply(backend, { type: 'drain' });
      const drainDeadline = admin.applyDeadline(backend, deadline.ms);
      admin.audit(request, `drain backend ${backend.name}`, {
        backend: backend.name,
        inflight: backend.inflight,
        drain_deadline: drainDeadline,
      });
      return { ...backendStatus(backend), drain_deadline: drainDeadline };
    },
  );
}

function registerResumeAndRestart(app: FastifyInstance, admin: AdminCalls): void {
  const { onRequest } = admin;
  app.post('/fleet/backends/:name/resume', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = admin.find(request, reply);
    if (backend === null) return reply;
    if (backend.removing) return sendError(reply, 409, `backend "${backend.name}" is being removed`);
    admin.fleet.registry.apply(backend, { type: 'resume' });
    admin.audit(request, `resume backend ${backend.name}`, { backend: backend.name });
    return backendStatus(backend);
  });

  app.post('/fleet/backends/:name/restart', { schema: nameParams, onRequest }, async (request: Named, reply) => {
    const backend = admin.find(request, reply);
    if (backend === null) return reply;
    const supervisor = admin.control.supervisorOf(backend.name);
    if (supervisor === undefined) {
      const message = `backend "${backend.name}" was not started by fleetgate launch: restart it where it runs`;
      return sendError(reply, 409, message);
    }
    supervisor.restart();
    admin.audit(request, `restart backend ${backend.name}`, { backend: backend.name, inflight: backend.inflight });
    return backendStatus(backend);
  });
}

function registerReload(app: FastifyInstance, admin: AdminCalls): void {
  const { control, onRequest } = admin;
  app.post('/fleet/reload', { onRequest }, async (request, reply) => {
    if (control.reload === null) {
      return sendError(reply, 501, 'reload is not available: fleetgate was not started from a config');
    }
    const outcome = control.reload();
    if (!outcome.ok) {
      request.log.warn(
        { admin: { from: peerAddress(request), action: 'reload' } },
        `admin: reload refused: ${outcome.message}`,
      );
      return sendError(reply, outcome.status, outcome.message);
    }
    admin.audit(request, 'reload', { ...outcome.result });
    return outcome.result;
  });
}
