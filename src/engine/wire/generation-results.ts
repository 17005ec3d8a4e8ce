// Results both engines give in the same shape.
import type { GenerationResult } from "../../contract/generation.js";

/** A request cancelled while it waited for a slot: nothing evaluated, nothing held. */
export function cancelledInQueue(promptTokens: number, queueMs: number): GenerationResult {
  return {
    text: "",
    finishReason: "cancelled",
    promptTokens,
    cachedTokens: 0,
    restoredTokens: 0,
    evictedTokens: 0,
    spilledTokens: 0,
    completionTokens: 0,
    slot: -1,
    heldPromptTokens: 0,
    queueMs,
    prefillMs: 0,
    totalMs: queueMs,
  };
}
