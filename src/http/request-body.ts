/**
 * The one place that decides what a request body is on fleetgate's own routes (admin API, Batch
 * API), installed where the app is built (`app.ts` `createApp`):
 *
 * - An empty body is no body: zero bytes under `content-type: application/json` (what the Python
 *   `openai` SDK sends for `batches.cancel`, and `curl -X POST -H 'content-type: application/json'`)
 *   reads as a POST without a body, where fastify's own JSON parser answers 400. `{}` is an empty
 *   object. So a route that takes no body takes all three alike.
 * - A route that needs a body says so (`config.body`, or a body schema with `required` fields) and a
 *   request without one gets a 400 naming what is missing, before the route runs.
 * - `routeBodies(app)` is the table of every route with a body and what it needs; the tests walk it,
 *   so a new route cannot be left out.
 *
 * The traffic path replaces every parser in its scope with its own (the body as a Buffer, whatever
 * its type: proxy/traffic-routes.ts), so nothing here runs for a proxied request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { sendError } from './openai-error.js';

/** What a route's body must hold. */
interface BodyNeed {
  /** `application/json` or `multipart/form-data`. */
  type: string;
  /** The fields it cannot do without, as the 400 names them. */
  fields: readonly string[];
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The body this route needs; absent: it takes none, or an optional one (its schema may still require one). */
    body?: BodyNeed;
  }
}

/** A route that may carry a body, and what its body must hold (null: none needed). */
export interface RouteBody {
  method: string;
  url: string;
  needs: BodyNeed | null;
}

const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const tables = new WeakMap<FastifyInstance, RouteBody[]>();

/** Every route registered on `app` after `registerRequestBodies` whose method carries a body. */
export function routeBodies(app: FastifyInstance): readonly RouteBody[] {
  return tables.get(app) ?? [];
}

/** Installs the JSON parser and the missing-body check on `app`, before any route is registered. */
export function registerRequestBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body.length === 0) return done(null, undefined);
    // `parseAs: 'string'`: fastify hands a string (its types allow a Buffer for either setting).
    parseJson(request, body as string, done);
  });

  const table: RouteBody[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (route) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => BODY_METHODS.has(m));
    if (methods.length === 0) return;
    const needs = bodyNeed(route);
    for (const method of methods) table.push({ method, url: route.url, needs });
    if (needs !== null) route.preValidation = [...hooksOf(route.preValidation), requireBody(needs)];
  });
}

/** `config.body`, else the required fields of a JSON body schema, else null. */
function bodyNeed(route: RouteOptions): BodyNeed | null {
  if (route.config?.body !== undefined) return route.config.body;
  const schema = route.schema?.body as { required?: unknown } | undefined;
  const required = schema?.required;
  if (!Array.isArray(required) || required.length === 0) return null;
  return { type: 'application/json', fields: required.map(String) };
}

function hooksOf<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/** A request with no body (none sent, or an empty one) gets a 400 naming what the route needs. */
function requireBody(needs: BodyNeed) {
  const fields = needs.fields.join(', ');
  return (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (request.body !== undefined && request.body !== null) return done();
    const path = request.routeOptions.url ?? request.url.split('?')[0];
    void sendError(reply, 400, `${request.method} ${path} needs a body (${needs.type}) with: ${fields}; it got none`);
  };
}
