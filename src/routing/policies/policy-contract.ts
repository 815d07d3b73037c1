/** What a picking policy sees and answers. Policies only read candidates; none filters health itself. */
import type { PromptTraits } from '../request-traits.js';

export interface Candidate {
  readonly name: string;
  /** Comparable load: in-flight at fleetgate, refined by the backend's reported queue. */
  readonly load: number;
  /**
   * The backend reports idle batch slots: it runs fewer than its `max_running_requests`, and its own
   * queue holds fewer than `QUEUE_ALLOWANCE` (backend-load.ts: one arrival between two steps is no queue).
   */
  readonly idleSlot?: boolean;
  /**
   * The same, with this replica's dispatches since the report counted `routing.replicas` times: the
   * slots the other replicas have probably not filled meanwhile.
   */
  readonly idleSlotFleetWide?: boolean;
  /** The backend's KV pool in tokens (`max_total_num_tokens`), when reported. */
  readonly kvTokens?: number | null;
}

export interface Policy {
  /**
   * `candidates` is non-empty; `traits` are the request's, where the policy uses them; `pool`: every
   * ready backend of the request's model, free or not (what a load bound averages over).
   */
  pick<C extends Candidate>(candidates: readonly C[], traits?: PromptTraits, pool?: readonly Candidate[]): C;
  /** The request was sent to `candidate`. */
  onDispatch?(candidate: Candidate, traits?: PromptTraits): void;
  /** Whether the request's prefix or session is on `candidate` enough for the policy to prefer it. */
  affinity?(candidate: Candidate, traits?: PromptTraits, pool?: readonly Candidate[]): boolean;
  /** The backend left rotation. */
  forget?(name: string): void;
}
