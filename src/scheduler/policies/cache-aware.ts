// cache-aware: SGLang router's published rule (sgl-model-gateway policies/cache_aware.rs),
// kept as the reference to beat. Per request:
//   1. load imbalance: if (max_load - min_load) > balanceAbsThreshold AND
//      max_load > balanceRelThreshold x min_load, go to the least loaded worker;
//   2. else if matched / input > cacheThreshold, go to the worker with the longest
//      match;
//   3. else the least loaded worker.
// Load is requests in flight. SGLang matches characters in one tree per worker and prunes
// it by LRU every 60 s down to a size cap; here the match comes from the shared token tree,
// whose view of each worker is bounded by that worker's KV capacity, so it never routes to
// a prefix the worker has already evicted.
import { Type, type Static } from "@sinclair/typebox";
import { SETTINGS_OBJECT } from "../../common/settings-schema.js";
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { leastLoaded, longestMatch } from "./pick.js";

/** scheduler.cacheAware in config.yml: SGLang's published defaults. */
export const CacheAwareSettingsSchema = Type.Object(
  {
    balanceAbsThreshold: Type.Number({ minimum: 0, default: 64, description: "SGLang: imbalance when max - min in-flight exceeds this..." }),
    balanceRelThreshold: Type.Number({ minimum: 1, default: 1.5, description: "...and max > this x min." }),
    cacheThreshold: Type.Number({ minimum: 0, maximum: 1, default: 0.3, description: "SGLang: route to the longest match when matched / input exceeds this." }),
  },
  SETTINGS_OBJECT,
);

export type CacheAwareSettings = Static<typeof CacheAwareSettingsSchema>;

export class CacheAwarePolicy implements PlacementPolicy {
  readonly name = "cache-aware";

  constructor(private readonly options: CacheAwareSettings) {}

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
