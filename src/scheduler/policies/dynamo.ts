// dynamo: NVIDIA Dynamo's KV router (lib/kv-router scheduling, DefaultWorkerSelector), as a
// baseline to compare against. For every worker it prices the request in KV blocks:
//   logit = overlapScoreWeight x potential prefill blocks + potential decode blocks
//   potential prefill blocks = (prefill tokens still pending on the worker
//                               + the request's tokens the worker does not hold) / blockSize
//   potential decode blocks  = (tokens of the requests in flight on the worker
//                               + the request's tokens the worker does not hold) / blockSize
// and the lowest logit wins (temperature 0, Dynamo's default: no softmax sampling; ties go to
// the first worker). Published defaults: overlap score weight 1.0; the block size is the
// engine's (vLLM's 16 here: llama.cpp has no blocks, so tokens are counted in 16s).
// Dynamo learns that a request's prefill ended from the engine; Radixgate's scheduler learns
// it from the request's first token, so pending prefill is the uncached prompt of the
// requests on the worker whose first token has not come.
import { Type, type Static } from "@sinclair/typebox";
import { SETTINGS_OBJECT } from "../../common/settings-schema.js";
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { minBy } from "./pick.js";

/** scheduler.dynamo in config.yml: Dynamo's published defaults. */
export const DynamoSettingsSchema = Type.Object(
  {
    overlapScoreWeight: Type.Number({
      minimum: 0,
      default: 1,
      description: "Dynamo's kv-overlap-score-weight: weight of the prefill blocks against the decode blocks.",
    }),
    blockSize: Type.Integer({ minimum: 1, default: 16, description: "Tokens per KV block in the cost (vLLM's default block)." }),
  },
  SETTINGS_OBJECT,
);

export type DynamoSettings = Static<typeof DynamoSettingsSchema>;

export class DynamoPolicy implements PlacementPolicy {
  readonly name = "dynamo";

  constructor(private readonly options: DynamoSettings) {}

  /** The request's cost on `worker` in KV blocks: lower is better. */
  logit(request: PlacementRequest, worker: WorkerView): number {
    const newTokens = Math.max(0, request.tokens.length - worker.matchedTokens);
    const prefillBlocks = (worker.pendingPrefillTokens + newTokens) / this.options.blockSize;
    const decodeBlocks = (worker.activeTokens + newTokens) / this.options.blockSize;
    return this.options.overlapScoreWeight * prefillBlocks + decodeBlocks;
  }

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const best = minBy(candidates, (worker) => this.logit(request, worker));
    return best && { workerId: best.id, reason: best.matchedTokens > 0 ? "kv-overlap" : "kv-load", matchedTokens: context.match.longest };
  }
}
