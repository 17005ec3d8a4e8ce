// OpenAI's logprobs from node-llama-cpp's next-token probabilities. The probabilities come
// per sampled token (a patch hands them over; see docs/engine.md), but node-llama-cpp
// releases a token as text only later (it holds back partial UTF-8 characters and possible
// stop triggers, and never releases a stop trigger's tokens). So each sampled token's entry
// waits until the token is released, and travels with the text it became.
import type { LlamaModel, Token } from "node-llama-cpp";
import type { TokenLogprob } from "../../contract/generation.js";

/** OpenAI's stand-in for the log of a zero probability. */
const LOG_ZERO = -9999;
/**
 * Tokens before the one spelled that it is spelled after (the prompt's last ones, then the
 * generated ones), as the worker spells the text it sends: a SentencePiece token's leading
 * space shows only after other text. So the tokens of a completion join to exactly its text.
 */
const SPELLING_CONTEXT = 4;

export class LogprobRecorder {
  private readonly sampled: { token: Token; entry: TokenLogprob }[] = [];
  private released: TokenLogprob[] = [];
  /** The tokens just before the next one. */
  private readonly before: Token[];

  constructor(
    private readonly model: LlamaModel,
    private readonly top: number,
    prompt: readonly Token[],
  ) {
    this.before = prompt.slice(-SPELLING_CONTEXT);
  }

  /** node-llama-cpp sampled `token` from these candidates (most likely first). */
  onSampled(token: Token, probabilities: Map<Token, number>): void {
    const top: TokenLogprob["top"] = [];
    for (const [candidate, probability] of probabilities) {
      if (top.length >= this.top) break;
      top.push(this.entryOf(candidate, probability));
    }
    this.sampled.push({ token, entry: { ...this.entryOf(token, probabilities.get(token) ?? 0), top } });
    this.before.push(token);
    if (this.before.length > SPELLING_CONTEXT) this.before.shift();
  }

  /** node-llama-cpp released these tokens as text. */
  onReleased(tokens: readonly Token[]): void {
    for (const token of tokens) {
      // Tokens sampled but never released (none so far in node-llama-cpp) are skipped.
      const at = this.sampled.findIndex((item) => item.token === token);
      if (at < 0) continue;
      this.released.push(this.sampled[at]!.entry);
      this.sampled.splice(0, at + 1);
    }
  }

  /** The entries released since the last call: they go with the text sent now. */
  take(): TokenLogprob[] {
    const taken = this.released;
    this.released = [];
    return taken;
  }

  private entryOf(token: Token, probability: number): { token: string; logprob: number; bytes: number[] } {
    const text = this.model.detokenize([token], true, this.before);
    return { token: text, logprob: probability > 0 ? Math.max(LOG_ZERO, Math.log(probability)) : LOG_ZERO, bytes: [...Buffer.from(text, "utf8")] };
  }
}
