// What one worker keeps in its state store, as its reports say: the KV states it saved when
// a slot was reused (or adopted from another worker's copy), each by the worker's id for it
// and the tokens it holds. A slot keeps a conversation only until another request needs the
// slot; the store keeps it after that, and loading it back into a slot costs a fraction of
// computing it again. The tree sees only the slots, so without these the scheduler places an
// agent's next turn as if its history were gone from every worker.
import { commonPrefixLength, type TokenIds } from "../../common/tokens.js";

/** A worker's report of what its store gained and lost since its last report. */
export interface StoreChanges {
  stored: readonly { id: string; tokens: TokenIds }[];
  dropped: readonly string[];
}

/**
 * Stored states the scheduler keeps per worker, at most this many: a worker's own store is
 * bounded by its byte budget; this bounds the scheduler whatever a worker reports. Past it the
 * oldest report is forgotten (the worker may still load it: the scheduler only misses a hit).
 */
export const MAX_STORED_STATES = 4096;

export class StoredStates {
  /** In the order they were reported (a Map keeps insertion order): the oldest first. */
  private readonly byId = new Map<string, TokenIds>();

  get size(): number {
    return this.byId.size;
  }

  /** Applies a worker's report: its new states, then the ones it dropped. */
  apply(changes: StoreChanges): void {
    for (const { id, tokens } of changes.stored) {
      this.byId.delete(id);
      this.byId.set(id, tokens);
    }
    for (const id of changes.dropped) this.byId.delete(id);
    for (const id of this.byId.keys()) {
      if (this.byId.size <= MAX_STORED_STATES) break;
      this.byId.delete(id);
    }
  }

  /** The worker restarted or left: its store went with it. */
  clear(): void {
    this.byId.clear();
  }

  /** Every state, oldest report first. */
  *entries(): IterableIterator<{ id: string; tokens: TokenIds }> {
    for (const [id, tokens] of this.byId) yield { id, tokens };
  }

  /**
   * The longest prefix of `prompt` a stored state holds, when it is longer than `atLeast`
   * (what the worker's slots give already); else 0. A state that goes on past the prompt
   * counts for what it shares: the worker loads it and drops the rest.
   */
  longestPrefix(prompt: TokenIds, atLeast: number): number {
    let best = 0;
    for (const tokens of this.byId.values()) {
      if (tokens.length <= Math.max(atLeast, best)) continue;
      const shared = commonPrefixLength(tokens, prompt);
      if (shared > best) best = shared;
    }
    return best > atLeast ? best : 0;
  }
}
