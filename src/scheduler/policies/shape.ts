// shape: the message-shape rule (docs/placement.md), measured to get both warm agent turns
// (1095 ms, as good as pinned) and a fast cold burst (19.97 s, close to spread's 18.6 s):
//   - continuation (more than one message, the signature of an agent loop re-sending its
//     context) -> pin to the worker that served that prefix: here the worker whose KV
//     holds the longest prefix of the prompt (at least half of it), read from the token radix tree (a byte-prefix
//     hash would silently never pin prompts shorter than its window; the tree cannot miss);
//   - anything else (one-shot question, batch member, parallel subagent) -> spread with a
//     counter, not a hash of the prefix.
import type { Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "../types.js";
import { longestMatch, SpreadCounter } from "./pick.js";

export class ShapePolicy implements PlacementPolicy {
  readonly name = "shape";
  private readonly counter = new SpreadCounter();

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    if (request.messageCount > 1) {
      const holder = longestMatch(candidates, request.tokens.length);
      if (holder) return { workerId: holder.id, reason: "continuation", matchedTokens: context.match.longest };
    }
    const worker = this.counter.next(request.modelId, candidates);
    return worker && { workerId: worker.id, reason: "spread", matchedTokens: context.match.longest };
  }
}
