// How a generation ended: what the engine reports and the HTTP side turns into a response.
// Types only, shared by http/, serving/ and engine/.

export type FinishReason = "stop" | "length" | "cancelled";

/** One generated token's log probability, with the most likely candidates at its place. */
export interface TokenLogprob {
  token: string;
  /** Natural log; -9999 stands for a probability that is 0 (as OpenAI writes it). */
  logprob: number;
  /** The UTF-8 bytes of `token`. */
  bytes: number[];
  /** The most likely candidates, most likely first: as many as the request asked for. */
  top: { token: string; logprob: number; bytes: number[] }[];
}

export interface GenerationResult {
  text: string;
  /** Present when the request asked for logprobs: one entry per token of `text`. */
  logprobs?: TokenLogprob[];
  finishReason: FinishReason;
  promptTokens: number;
  /** Prompt tokens the slot's KV already held: not evaluated again for this request. */
  cachedTokens: number;
  /** Of those, the tokens loaded back from a spilled (or copied) state rather than kept in the slot. */
  restoredTokens: number;
  /** Tokens of the slot's previous content this request discarded (an LRU eviction when > 0). */
  evictedTokens: number;
  /** Of those, the tokens saved to the state store first (a spill). */
  spilledTokens: number;
  /** Set when loading a stored KV state failed: the reason. The prompt was computed instead. */
  restoreFailed?: string;
  completionTokens: number;
  slot: number;
  /**
   * Prompt tokens the slot's KV holds when the generation ends: all of them after a
   * generation, fewer when it was cancelled during its prefill. The host's report of the
   * slot (sent at start, with the whole prompt) is cut back to this.
   */
  heldPromptTokens: number;
  /**
   * The generated tokens the slot's KV holds after the whole prompt when the generation ends:
   * every one but the last sampled (never evaluated). The host's report of the slot grows by
   * them, so the next turn of a conversation, which sends the answer back, is matched through
   * it. Absent when the engine does not know the tokens or the slot lost part of the prompt.
   */
  heldAnswerTokens?: number[];
  queueMs: number;
  /** From taking the slot to the first generated token: the prefill of the uncached part. */
  prefillMs: number;
  totalMs: number;
  /**
   * The ms between one text piece and the next, measured where they were made, for the pieces
   * that were not sent one by one (an answer asked for whole: `pieces: "first"`).
   */
  textGapsMs?: number[];
}

/**
 * Which text pieces of a generation its caller reads: every one as it is made (a stream), or
 * only the first (an answer returned whole: the first piece marks the end of its prefill, the
 * whole text comes in the result). Engines that can skip the other pieces do: one message
 * fewer per token between the worker and the host.
 */
export type TextPieces = "all" | "first";
