// llm-d: the llm-d inference scheduler's weighted scorers (filter -> score -> pick), as a
// baseline to compare against. Every scorer gives each worker a score in [0, 1]; the worker
// with the highest weighted sum wins (the max-score picker; ties go to the first worker):
//   precise prefix-cache scorer: the fraction of the prompt the worker holds in its KV
//     cache (from the same KV events the tree is built from), weight 2.0;
//   KV-cache utilisation scorer: 1 - the worker's KV use, weight 1.0;
//   queue scorer: the worker's waiting requests, min-max normalised over the candidates
//     (the shortest queue scores 1, the longest 0; all equal score 1), weight 1.0.
// Those weights are the ones this project was asked to compare against; llm-d's own sample
// configurations vary them (e.g. 3/2/2), and they are settings here.
import { Type, type Static } from "@sinclair/typebox";
import { SETTINGS_OBJECT } from "../../common/settings-schema.js";
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";

/** scheduler.llmD in config.yml. */
export const LlmDSettingsSchema = Type.Object(
  {
    prefixWeight: Type.Number({ minimum: 0, default: 2, description: "Weight of the precise prefix-cache scorer." }),
    kvUtilizationWeight: Type.Number({ minimum: 0, default: 1, description: "Weight of the KV-cache utilisation scorer." }),
    queueWeight: Type.Number({ minimum: 0, default: 1, description: "Weight of the queue scorer." }),
  },
  SETTINGS_OBJECT,
);

export type LlmDSettings = Static<typeof LlmDSettingsSchema>;

/** Requests placed on the worker beyond its slots. */
const waiting = (worker: WorkerView) => Math.max(0, worker.inFlight - worker.slots);

export class LlmDPolicy implements PlacementPolicy {
  readonly name = "llm-d";

  constructor(private readonly options: LlmDSettings) {}

  /** Each worker's weighted score: higher is better. */
  scores(request: PlacementRequest, candidates: readonly WorkerView[]): number[] {
    const queues = candidates.map(waiting);
    const shortest = Math.min(...queues);
    const longest = Math.max(...queues);
    return candidates.map((worker, i) => {
      const prefix = request.tokens.length > 0 ? worker.matchedTokens / request.tokens.length : 0;
      const kvFree = worker.kvCapacityTokens > 0 ? 1 - Math.min(1, worker.kvTokens / worker.kvCapacityTokens) : 0;
      const queue = longest === shortest ? 1 : (longest - queues[i]!) / (longest - shortest);
      return this.options.prefixWeight * prefix + this.options.kvUtilizationWeight * kvFree + this.options.queueWeight * queue;
    });
  }

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const scores = this.scores(request, candidates);
    // The max-score picker; the first of equal scores wins.
    const best = candidates[scores.indexOf(Math.max(...scores))];
    return best && { workerId: best.id, reason: best.matchedTokens > 0 ? "prefix-score" : "load-score", matchedTokens: context.match.longest };
  }
}
