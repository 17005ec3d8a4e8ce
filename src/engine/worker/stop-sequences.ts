// OpenAI `stop` sequences, matched on the generated text as the client sees it.
//
// node-llama-cpp's own stop triggers match each token's text detokenized on its own, which
// loses SentencePiece's leading space: a stop of " User:" never fires and "User:" cuts the
// space before it (measured on 3.21.1). So Radixgate matches on the streamed text instead,
// and holds back any tail that could still grow into a stop sequence, so a client never
// receives text that a stop later removes.
export class StopSequenceFilter {
  private pending = "";
  private stoppedAt = false;
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = Math.max(0, ...stops.map((stop) => stop.length));
  }

  get stopped(): boolean {
    return this.stoppedAt;
  }

  /** Feeds generated text; returns the part that is safe to send now. */
  push(text: string): string {
    if (this.stoppedAt) return "";
    if (this.stops.length === 0) return text;
    this.pending += text;
    const hit = this.firstStop();
    if (hit >= 0) {
      this.stoppedAt = true;
      const safe = this.pending.slice(0, hit);
      this.pending = "";
      return safe;
    }
    const keep = this.heldBack();
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

  private firstStop(): number {
    let first = -1;
    for (const stop of this.stops) {
      const at = stop.length === 0 ? -1 : this.pending.indexOf(stop);
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    return first;
  }

  /** Length of the longest tail of `pending` that is a proper prefix of some stop sequence. */
  private heldBack(): number {
    const limit = Math.min(this.pending.length, this.longest - 1);
    for (let length = limit; length > 0; length--) {
      const tail = this.pending.slice(this.pending.length - length);
      if (this.stops.some((stop) => stop.startsWith(tail))) return length;
    }
    return 0;
  }
}
