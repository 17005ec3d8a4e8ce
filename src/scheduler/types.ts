// The contract between the serving layer, the global scheduler and every placement policy.
// Pure data: nothing here sees node-llama-cpp, fastify or a clock it was not given.
import type { TokenIds } from "../common/tokens.js";
import type { StoreChanges } from "./placement/stored-states.js";
import type { RadixTree } from "./radix/tree.js";
import type { PrefixMatch } from "./radix/types.js";
import type { TimeModel } from "./time-model.js";

/** What a policy may know about a candidate worker when it places a request. */
export interface WorkerView {
  id: string;
  modelId: string;
  alive: boolean;
  /** Requests placed on it and not finished yet (running or queued on it). */
  inFlight: number;
  /** Slots (sequences) the worker runs at once. */
  slots: number;
  /** Longest prefix of THIS request's prompt the worker holds in its KV cache. */
  matchedTokens: number;
  /**
   * The part of it a request admitted now would reuse: the longest prefix of the prompt an
   * idle slot of the worker holds. What only running requests' slots hold (or what a request
   * placed there is still to compute) is recomputed in another slot. Equal to matchedTokens
   * for a worker that reports no slots.
   */
  reusableTokens: number;
  /**
   * Longest prefix of THIS request's prompt a state in the worker's state store holds (what
   * it saved from a reused slot, or adopted from a copy), when longer than reusableTokens;
   * else 0. The worker loads it into the slot instead of computing it (TimeModel.restoreMs).
   */
  readonly storedTokens: number;
  /** KV tokens the tree sees the worker holding, and its KV capacity in tokens. */
  kvTokens: number;
  kvCapacityTokens: number;
  /** Prompt tokens of the requests in flight on it (running or waiting). */
  activeTokens: number;
  /** Prompt tokens still to evaluate of the requests placed on it whose first token has not
   *  come: waiting for a slot, or in their prefill. */
  pendingPrefillTokens: number;
  /** The same tokens by where they stand in the worker's prefill order (batch-priority.ts,
   *  prefillRankOfHit: index = rank, higher ranks are evaluated first). */
  pendingPrefillByRank: ArrayLike<number>;
  /** Prefill work (ms) placed on the worker within the load window: Preble's L, prefill part. */
  windowedPrefillMs: number;
  /** The worker's time model: its prefill, decode and copy times. */
  readonly timeModel: TimeModel;
}

export interface PlacementRequest {
  modelId: string;
  /** The exact prompt tokens (what the worker will evaluate). Never written or transferred
   *  once placed: the tree may keep views of an Int32Array prompt instead of copies. */
  tokens: TokenIds;
  /** Chat messages in the request: more than one marks a continuation (an agent loop re-sending its context). */
  messageCount: number;
  /** x-session-id header, else the request's `user` field: sticks to one worker while it lives. */
  sessionId?: string;
  /** The request's completion limit, used as expected output length until outputs are observed. */
  maxTokens?: number;
  /** Workers not to place it on (an engine that stayed silent on this request's last try). */
  avoidWorkerIds?: readonly string[];
}

/** "Copy prefix tokens[0..n) from worker A to worker B": the worker runtime executes it. */
export interface CopyAction {
  modelId: string;
  fromWorkerId: string;
  toWorkerId: string;
  tokens: TokenIds;
  /** Predicted by the time model: what the copy costs vs recomputing on the target. */
  copyMs: number;
  recomputeMs: number;
}

export interface Placement {
  workerId: string;
  /** Short, loggable reason: "exploit", "explore", "yield", "replicate", "roundrobin", "session"... */
  reason: string;
  /** Longest cached prefix on any candidate (Preble's `matched`; preble counts only what a
   *  candidate could reuse now, its `reusableTokens` or `storedTokens`). */
  matchedTokens: number;
  /** Cost of each candidate in ms, for policies that price them (preble: those it priced in full). */
  costs?: Record<string, number>;
  /** Copy actions this decision asks for (hot-prefix replication). */
  copies?: CopyAction[];
  /** Id of the prefix node (in its model's tree) this request's statistics are kept under
   *  (hot-prefix detection). */
  prefixKey?: number;
}

/** What the global scheduler lends a policy for one decision: read it during `place`, do
 *  not keep it (the scheduler refreshes the same object for its next decision, and reuses
 *  the candidates' WorkerView objects the same way). */
export interface PlacementContext {
  now: number;
  /** The request's model's tree. */
  tree: RadixTree;
  /** The request matched against that tree, once per request. */
  match: PrefixMatch;
  /** Output tokens to expect from a request: median of recent outputs, else its max_tokens. */
  expectedOutputTokens(request: PlacementRequest): number;
}

export interface RequestOutcome {
  ok: boolean;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** Time to first token, ms, as the host saw it (queue + prefill). */
  ttftMs: number;
}

/**
 * A placement policy (sglang's `select(workers, request)` shape). `place` gets only live
 * workers that serve the request's model, and returns one of them, or undefined when the
 * list is empty. The hooks have no-op defaults.
 */
export interface PlacementPolicy {
  readonly name: string;
  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined;
  /** Called once for every placed request when it ends, successful or not. */
  onRequestComplete?(placement: Placement, request: PlacementRequest, outcome: RequestOutcome, now: number): void;
  /** The node `prefixKey` left the model's tree (ids are never reused): drop whatever is kept
   *  under it. Called while the tree is changing: do not read the tree here. */
  onPrefixRemoved?(modelId: string, prefixKey: number): void;
  /** Entries in each map the policy keeps, by name (read-only; tests, metrics). */
  stateSizes?(): Record<string, number>;
}

/** What workers report about their KV cache; the global tree applies these exactly. */
export type CacheEvent =
  /** Slot `slot` of the worker now holds exactly `tokens` (what it held before is gone). */
  | { type: "slot-holds"; workerId: string; slot: number; tokens: TokenIds }
  /** The worker lost its whole cache (restart, crash). */
  | { type: "worker-reset"; workerId: string }
  /** The worker's state store gained and lost these states (placement/stored-states.ts). */
  | { type: "store-changed"; workerId: string; changes: StoreChanges };
