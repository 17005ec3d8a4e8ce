// The text of generated tokens handed back several at a time, spelled as LlamaCompletion
// spells them one at a time: each release after the tokens released before it (a
// SentencePiece tokenizer spells a word's leading space from what precedes it), and tokens
// that end in part of a character (a token's bytes can be half of a UTF-8 sequence) held
// back until the character is whole.
import type { LlamaModel, Token } from "node-llama-cpp";

/** What detokenize spells for bytes that are not a whole character yet. */
const PARTIAL_CHARACTER = "\uFFFD";
/** A UTF-8 character is at most 4 bytes: never hold back more tokens than that. */
const MAX_HELD = 3;
/** Released tokens kept as the spelling's context. */
const CONTEXT_TOKENS = 16;

export interface SpelledTokens {
  tokens: Token[];
  text: string;
}

export class TokenSpeller {
  private held: Token[] = [];
  private context: Token[] = [];

  constructor(
    private readonly model: LlamaModel,
    private readonly extraStopTokens: ReadonlySet<number>,
  ) {}

  /** Whether `token` ends a generation (the vocabulary's end-of-generation tokens and the model's extra ones). */
  ends(token: Token): boolean {
    return this.model.isEogToken(token) || this.extraStopTokens.has(token);
  }

  /** The tokens to release now and their text; a trailing part of a character is held back. */
  push(tokens: readonly Token[]): SpelledTokens {
    const all = this.held.concat(tokens);
    for (let cut = all.length; cut >= 0 && all.length - cut <= MAX_HELD; cut--) {
      const text = cut === 0 ? "" : this.model.detokenize(all.slice(0, cut), false, this.context);
      if (!text.endsWith(PARTIAL_CHARACTER)) return this.release(all, cut, text);
    }
    // No cut spells whole characters (bytes that never make one): release them as they are.
    return this.release(all, all.length, this.model.detokenize(all, false, this.context));
  }

  /** At the end of the generation: whatever was held back. */
  flush(): SpelledTokens {
    const all = this.held;
    return this.release(all, all.length, all.length === 0 ? "" : this.model.detokenize(all, false, this.context));
  }

  private release(all: Token[], cut: number, text: string): SpelledTokens {
    const tokens = all.slice(0, cut);
    this.held = all.slice(cut);
    this.context = this.context.concat(tokens).slice(-CONTEXT_TOKENS);
    return { tokens, text };
  }
}

/**
 * Tokens that end a plain completion besides the vocabulary's end-of-generation tokens, as
 * node-llama-cpp's LlamaCompletion adds them (3.21.1: a Gemma model's file separator and
 * fill-in-the-middle prefix).
 */
export function extraStopTokensOf(model: LlamaModel): Set<number> {
  const extra = new Set<number>();
  const architecture = model.fileInfo.metadata?.general?.architecture as string | undefined;
  if (architecture !== "gemma" && architecture !== "gemma2") return extra;
  for (const token of model.iterateAllTokens()) {
    const text = model.detokenize([token], true);
    if (text === "<|file_separator|>" || text === "<|fim_prefix|>") extra.add(token);
    if (extra.size === 2) break;
  }
  return extra;
}
