// Small, shared ways of choosing among candidates. Ties always break by list order (the
// fleet's worker order), so every policy is deterministic for the same inputs.
import type { WorkerView } from "../types.js";

/** The candidate with the lowest score; the first one wins ties. */
export function minBy(candidates: readonly WorkerView[], score: (worker: WorkerView) => number): WorkerView | undefined {
  let best: WorkerView | undefined;
  let bestScore = Infinity;
  for (const worker of candidates) {
    const value = score(worker);
    if (best === undefined || value < bestScore) {
      best = worker;
      bestScore = value;
    }
  }
  return best;
}

/** Fewest requests in flight. */
export function leastLoaded(candidates: readonly WorkerView[]): WorkerView | undefined {
  return minBy(candidates, (worker) => worker.inFlight);
}

/**
 * The candidate holding the longest prefix of the prompt (fewest in flight among equals), when
 * that prefix is at least `minFraction` of the prompt; else undefined. Every chat prompt starts
 * with the same template tokens (and a trace's prompts may share one block): a match that
 * short says nothing about where a conversation lives, and following it would pin every
 * request to one worker (found by the simulator: shape and affinity put a whole agent-loop
 * workload on one of 8 workers). Half the prompt is llama-server's slot similarity, 0.5.
 */
export function longestMatch(candidates: readonly WorkerView[], promptTokens: number, minFraction = 0.5): WorkerView | undefined {
  const best = minBy(candidates, (worker) => -worker.matchedTokens * 1e6 + worker.inFlight);
  if (!best || best.matchedTokens === 0) return undefined;
  return best.matchedTokens >= minFraction * promptTokens ? best : undefined;
}

/** A counter that spreads picks evenly, one per model. */
export class SpreadCounter {
  private readonly turns = new Map<string, number>();

  next(modelId: string, candidates: readonly WorkerView[]): WorkerView | undefined {
    if (candidates.length === 0) return undefined;
    const turn = this.turns.get(modelId) ?? 0;
    this.turns.set(modelId, turn + 1);
    return candidates[turn % candidates.length];
  }
}
