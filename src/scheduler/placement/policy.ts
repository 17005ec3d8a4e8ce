// The last step: the configured policy chooses among the candidates the overrides left.
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";

export function policyPlacement(
  policy: PlacementPolicy,
  request: PlacementRequest,
  candidates: readonly WorkerView[],
  context: PlacementContext,
): Placement | undefined {
  const placement = policy.place(request, candidates, context);
  // A choice outside the candidates would bypass the filters: a bug, never a placement.
  if (placement && !candidates.some((worker) => worker.id === placement.workerId)) {
    throw new Error(`policy ${policy.name} chose ${placement.workerId}, which is not a candidate`);
  }
  return placement;
}
