// The contract between the serving layer and every placement policy. Pure data: a policy
// never sees node-llama-cpp, fastify or a clock it did not get injected.
import type { TokenIds } from "../common/tokens.js";

/** What a policy may know about a worker when it places a request. */
export interface WorkerView {
  id: string;
  modelId: string;
  alive: boolean;
  /** Requests placed on it and not finished yet. */
  inFlight: number;
}

export interface PlacementRequest {
  modelId: string;
  /** The exact prompt tokens (what the worker will evaluate). */
  tokens: TokenIds;
  /** Chat messages in the request: more than one marks a continuation (seed 000). */
  messageCount: number;
}

export interface Placement {
  workerId: string;
  /** Short, loggable reason, e.g. "roundrobin". */
  reason: string;
}

/**
 * A placement policy (sglang's `select(workers, request)` shape). `place` gets only live
 * workers that serve the request's model and returns one of them, or undefined when the
 * list is empty. The optional hooks have no-op defaults.
 */
export interface PlacementPolicy {
  readonly name: string;
  place(request: PlacementRequest, candidates: readonly WorkerView[]): Placement | undefined;
  /** Called once for every placed request when it ends, successful or not. */
  onRequestComplete?(workerId: string, request: PlacementRequest, outcome: { ok: boolean; cachedTokens: number }): void;
}
