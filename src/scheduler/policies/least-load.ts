// least-load: the worker with the fewest requests in flight, blind to the cache. A reference
// point: it spreads as well as a counter under uneven request lengths, and reuses nothing
// on purpose.
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { leastLoaded } from "./pick.js";

export class LeastLoadPolicy implements PlacementPolicy {
  readonly name = "least-load";

  place(_request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const worker = leastLoaded(candidates);
    return worker && { workerId: worker.id, reason: this.name, matchedTokens: context.match.longest };
  }
}
