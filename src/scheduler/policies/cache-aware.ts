// cache-aware: SGLang router's published rule (sgl-model-gateway policies/cache_aware.rs),
// kept as the reference to beat. Per request:
//   1. load imbalance: if (max_load - min_load) > balanceAbsThreshold (64) AND
//      max_load > balanceRelThreshold (1.5) x min_load, go to the least loaded worker;
//   2. else if matched / input > cacheThreshold (0.3), go to the worker with the longest
//      match;
//   3. else the least loaded worker.
// Load is requests in flight. SGLang matches characters in one tree per worker and prunes
// it by LRU every 60 s down to a size cap; here the match comes from the shared token tree,
// whose view of each worker is bounded by that worker's KV capacity, so it never routes to
// a prefix the worker has already evicted.
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { leastLoaded, longestMatch } from "./pick.js";

export interface CacheAwareOptions {
  balanceAbsThreshold: number;
  balanceRelThreshold: number;
  cacheThreshold: number;
}

export const CACHE_AWARE_DEFAULTS: CacheAwareOptions = { balanceAbsThreshold: 64, balanceRelThreshold: 1.5, cacheThreshold: 0.3 };

export class CacheAwarePolicy implements PlacementPolicy {
  readonly name = "cache-aware";

  constructor(private readonly options: CacheAwareOptions = CACHE_AWARE_DEFAULTS) {}

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    if (candidates.length === 0) return undefined;
    const loads = candidates.map((worker) => worker.inFlight);
    const maxLoad = Math.max(...loads);
    const minLoad = Math.min(...loads);
    const matchedTokens = context.match.longest;
    const place = (worker: WorkerView | undefined, reason: string) => worker && { workerId: worker.id, reason, matchedTokens };
    if (maxLoad - minLoad > this.options.balanceAbsThreshold && maxLoad > this.options.balanceRelThreshold * minLoad) {
      return place(leastLoaded(candidates), "imbalanced");
    }
    // SGLang applies its own threshold (cacheThreshold) below.
    const holder = longestMatch(candidates, request.tokens.length, 0);
    if (holder && holder.matchedTokens / Math.max(1, request.tokens.length) > this.options.cacheThreshold) {
      return place(holder, "cache-hit");
    }
    return place(leastLoaded(candidates), "least-load");
  }
}
