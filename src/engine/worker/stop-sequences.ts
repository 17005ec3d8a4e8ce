// OpenAI `stop` sequences, matched on the generated text as the client sees it.
//
// node-llama-cpp's own stop triggers match each token's text detokenized on its own, which
// loses SentencePiece's leading space: a stop of " User:" never fires and "User:" cuts the
// space before it (measured on 3.21.1). So Radixgate matches on the streamed text instead,
// and holds back any tail that could still grow into a stop sequence, so a client never
// receives text that a stop later removes.
import { firstMatch, partialMatchTail } from "../../common/text-patterns.js";

export class StopSequenceFilter {
  private pending = "";
  private stoppedAt = false;

  constructor(private readonly stops: readonly string[]) {}

  get stopped(): boolean {
    return this.stoppedAt;
  }

  /** Feeds generated text; returns the part that is safe to send now. */
  push(text: string): string {
    if (this.stoppedAt) return "";
    if (this.stops.length === 0) return text;
    this.pending += text;
    const hit = firstMatch(this.pending, this.stops);
    if (hit) {
      this.stoppedAt = true;
      const safe = this.pending.slice(0, hit.at);
      this.pending = "";
      return safe;
    }
    const keep = partialMatchTail(this.pending, this.stops);
    const safe = this.pending.slice(0, this.pending.length - keep);
    this.pending = this.pending.slice(this.pending.length - keep);
    return safe;
  }

  /** At the end of the generation: whatever was held back and did not become a stop. */
  flush(): string {
    const rest = this.pending;
    this.pending = "";
    return rest;
  }
}
