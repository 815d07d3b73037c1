/** Admin mutations of the fleet (added by the admin API work). */
import type { FastifyInstance } from 'fastify';
import type { Gateway, GatewayOptions } from '../proxy/gateway.js';

export async function registerAdminApi(_app: FastifyInstance, _gateway: Gateway, _opts: GatewayOptions): Promise<void> {}
