// Token log probabilities in OpenAI's two shapes: chat's `logprobs.content` entries, and the
// legacy completions' parallel lists (tokens, token_logprobs, top_logprobs, text_offset).
import type { TokenLogprob } from "../contract/generation.js";
import { ServingError } from "../serving/errors.js";

/** Chat: `logprobs: true` asks for them, `top_logprobs` for that many candidates per token. */
export function chatLogprobsOf(logprobs: boolean | null | undefined, topLogprobs: number | null | undefined): number | undefined {
  if (logprobs !== true) {
    if (topLogprobs != null && topLogprobs > 0) {
      throw new ServingError("invalid_request", "`top_logprobs` needs `logprobs: true`.", "top_logprobs");
    }
    return undefined;
  }
  return topLogprobs ?? 0;
}

export function chatLogprobs(entries: readonly TokenLogprob[] | undefined) {
  if (entries === undefined) return null;
  return {
    content: entries.map(({ token, logprob, bytes, top }) => ({ token, logprob, bytes, top_logprobs: top })),
    refusal: null,
  };
}

/** The legacy shape for text starting `offset` characters into the completion. */
export function completionLogprobs(entries: readonly TokenLogprob[] | undefined, offset = 0) {
  if (entries === undefined) return null;
  const textOffset: number[] = [];
  let at = offset;
  for (const entry of entries) {
    textOffset.push(at);
    at += entry.token.length;
  }
  return {
    tokens: entries.map((entry) => entry.token),
    token_logprobs: entries.map((entry) => entry.logprob),
    top_logprobs: entries.map((entry) => Object.fromEntries(entry.top.map((candidate) => [candidate.token, candidate.logprob]))),
    text_offset: textOffset,
  };
}
