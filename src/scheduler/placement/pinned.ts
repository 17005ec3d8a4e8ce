// Override 1: an operator's x-radixgate-worker runs the request on that worker, skipping the
// session and the policy. A pinned worker that is down or full gets nothing, and no other
// worker takes its request.
import type { Placement, WorkerView } from "../types.js";
import { candidateNamed } from "./candidate.js";

/** The request is placed nowhere (the caller answers 429 or 503). */
export const NO_PLACEMENT = Symbol("no placement");

/** undefined when nothing is pinned: the next step decides. */
export function pinnedPlacement(candidates: readonly WorkerView[], pinnedWorkerId: string | undefined): Placement | typeof NO_PLACEMENT | undefined {
  if (pinnedWorkerId === undefined) return undefined;
  const pinned = candidateNamed(candidates, pinnedWorkerId);
  return pinned ? { workerId: pinned.id, reason: "pinned", matchedTokens: pinned.matchedTokens } : NO_PLACEMENT;
}
