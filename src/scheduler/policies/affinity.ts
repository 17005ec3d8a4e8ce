// affinity: always the worker holding the longest cached prefix of the prompt (fewest in
// flight among equals), when it covers at least half the prompt; otherwise the least loaded
// worker. Best warm
// turns, worst bursts of one shared prefix: stick to one card and it overheats (docs/placement.md).
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { leastLoaded, longestMatch } from "./pick.js";

export class AffinityPolicy implements PlacementPolicy {
  readonly name = "affinity";

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const holder = longestMatch(candidates, request.tokens.length);
    const worker = holder ?? leastLoaded(candidates);
    return worker && { workerId: worker.id, reason: holder ? "affinity" : "least-load", matchedTokens: context.match.longest };
  }
}
