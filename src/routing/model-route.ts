/**
 * Which model pool a request goes to, from the `model` it names. Pure: the pools (model key → the
 * names its backends answer to) come from the registry, the aliases and default from the config.
 *
 * A fleet that serves one model routes as it always did: the request's `model` is not even read
 * (SGLang serves whatever name a client sends). With several models, or with `models` aliases or a
 * `default_model` configured, the name decides, and a name nobody serves is refused with the list.
 */
import { servesModel } from '../fleet/model-names.js';

export interface ModelRouteOptions {
  /** `models:` in the config: a name clients use → the served name it stands for. */
  aliases: Readonly<Record<string, string>>;
  /** `default_model`: for requests that name none (SGLang `/generate`), when several are served. */
  defaultModel: string | null;
}

export type ModelRoute =
  /** Any ready backend: the fleet serves a single model. */
  | { kind: 'any' }
  /** Ready backends serving `model` (matched as `expect_model` is: exact or last path segments). */
  | { kind: 'model'; model: string }
  | { kind: 'unknown'; requested: string; known: string[] }
  | { kind: 'unnamed'; known: string[] };

export class ModelRouter {
  readonly #opts: ModelRouteOptions;
  /** Names a request may resolve to before any backend serving them was read (a fleet still loading). */
  readonly #declared: ReadonlySet<string>;
  #pools = new Map<string, string[]>();

  constructor(opts: ModelRouteOptions) {
    this.#opts = opts;
    const declared = new Set(Object.values(opts.aliases));
    if (opts.defaultModel !== null) declared.add(opts.defaultModel);
    this.#declared = declared;
  }

  /** Call when a backend's served models were read or changed. */
  setPools(pools: Map<string, string[]>): void {
    this.#pools = pools;
  }

  /** True when requests are routed by the model they name (so their body must be read for it). */
  get byModel(): boolean {
    return this.#pools.size > 1 || this.#declared.size > 0;
  }

  /** The pool keys (the names the backends answer to), sorted. */
  get known(): string[] {
    return [...this.#pools.keys()].sort();
  }

  route(requested: string | null): ModelRoute {
    if (!this.byModel) return { kind: 'any' };
    const name = requested === null ? this.#opts.defaultModel : (this.#opts.aliases[requested] ?? requested);
    if (name === null) return { kind: 'unnamed', known: this.known };
    for (const [key, names] of this.#pools) if (servesModel(names, name)) return { kind: 'model', model: key };
    if (this.#declared.has(name)) return { kind: 'model', model: name };
    return { kind: 'unknown', requested: requested ?? name, known: this.known };
  }
}
