// roundrobin: a counter over the live workers of the requested model. Spreads a burst over
// every card, and loses every other cache hit in an agent loop (seed 000: warm-turn TTFT
// 2676 ms vs 1096 ms pinned): the baseline the prefix-aware policies are measured against.
import type { Placement, PlacementPolicy, PlacementRequest, WorkerView } from "./types.js";

export class RoundRobinPolicy implements PlacementPolicy {
  readonly name = "roundrobin";
  /** One counter per model, so traffic to one model does not skew the spread of another. */
  private readonly counters = new Map<string, number>();

  place(request: PlacementRequest, candidates: readonly WorkerView[]): Placement | undefined {
    if (candidates.length === 0) return undefined;
    const turn = this.counters.get(request.modelId) ?? 0;
    this.counters.set(request.modelId, turn + 1);
    const worker = candidates[turn % candidates.length]!;
    return { workerId: worker.id, reason: this.name };
  }
}
