// A worker's placements that no slot report has claimed yet, by prompt array: the report of
// that same array then starts from the placement's path in the tree instead of walking the
// tokens (see RadixTree.setSlot).
import type { TokenIds } from "../../common/tokens.js";
import type { InFlightHandle } from "../radix/types.js";

/**
 * A map from prompt array to placement, exactly (set overwrites, get, delete), with its
 * newest entry kept apart from the Map: a placement is usually claimed by its slot report
 * before the next placement on its worker, and a Map that keeps going from empty to one
 * entry and back re-allocates its table over and over (about half a microsecond a
 * placement). The entry kept apart is never also in the Map.
 */
export class UnreportedPlacements {
  private newest: InFlightHandle | null = null;
  private newestTokens: TokenIds | null = null;
  private readonly older = new Map<TokenIds, InFlightHandle>();

  get size(): number {
    return this.older.size + (this.newest === null ? 0 : 1);
  }

  set(tokens: TokenIds, placed: InFlightHandle): void {
    if (this.newest !== null && this.newestTokens !== tokens) this.older.set(this.newestTokens!, this.newest);
    if (this.older.size > 0) this.older.delete(tokens);
    this.newest = placed;
    this.newestTokens = tokens;
  }

  get(tokens: TokenIds): InFlightHandle | undefined {
    if (this.newestTokens === tokens) return this.newest!;
    return this.older.size > 0 ? this.older.get(tokens) : undefined;
  }

  delete(tokens: TokenIds): void {
    if (this.newestTokens === tokens) {
      this.newest = null;
      this.newestTokens = null;
    } else if (this.older.size > 0) {
      this.older.delete(tokens);
    }
  }

  clear(): void {
    this.newest = null;
    this.newestTokens = null;
    this.older.clear();
  }
}
