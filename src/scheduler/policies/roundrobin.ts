// roundrobin: a counter over the live workers of the requested model. Spreads a burst over
// every card, and loses every other cache hit in an agent loop (warm-turn TTFT 2676 ms vs
// 1096 ms pinned, docs/placement.md): the baseline the prefix-aware policies are measured against.
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { SpreadCounter } from "./pick.js";

export class RoundRobinPolicy implements PlacementPolicy {
  readonly name = "roundrobin";
  private readonly counter = new SpreadCounter();

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const worker = this.counter.next(request.modelId, candidates);
    return worker && { workerId: worker.id, reason: this.name, matchedTokens: context.match.longest };
  }
}
