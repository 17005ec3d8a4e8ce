// The candidate a decision names: what the overrides look up and what the scheduler books.
import type { WorkerView } from "../types.js";

/** The candidate with that id, if the filters left it. */
export function candidateNamed(candidates: readonly WorkerView[], workerId: string): WorkerView | undefined {
  for (let i = 0; i < candidates.length; i++) if (candidates[i]!.id === workerId) return candidates[i];
  return undefined;
}
