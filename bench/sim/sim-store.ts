// The simulated worker's state store: the prefixes copied in from other workers and, with
// `spec.spill`, the real worker's store of evicted slot contents in host memory (what it saves
// before a request overwrites a slot and loads into a slot; simulator.ts's header says when).
import { commonPrefixLength, type TokenIds } from "../../src/common/tokens.js";
import { StoreChangeLog, type StoreChanges, statesToDrop } from "../../src/scheduler/placement/stored-states.js";
import type { TimeModel } from "../../src/scheduler/time-model.js";

/** The real worker's state store (config.yml `spill`), in tokens. */
export interface SpillSpec {
  /** Tokens of stored states a worker keeps (config spill.budgetBytes / KV bytes per token). */
  budgetTokens: number;
  /** Only an evicted part at least this long is saved (config spill.minTokens). */
  minTokens: number;
  /** A stored state is loaded only when it shares at least this many tokens more than the slot (MIN_RESTORE_GAIN in src/engine/wire/protocol.ts). */
  minRestoreGain: number;
}

/** What getting a slot ready for a request did before its prefill. */
export interface SlotPreparation {
  /** Prompt tokens the slot holds for the request: what it shared, or a longer copied or stored prefix. */
  shared: number;
  /** The save and load it waits for, ms. */
  ioMs: number;
  /** The slot's content was saved to the store. */
  spilled: boolean;
  /** A stored state was loaded into the slot. */
  restored: boolean;
}

interface StoredState {
  id: string;
  tokens: TokenIds;
  lastUsedMs: number;
}

/** Copied-in prefixes a worker keeps (its state store, as far as copies go). */
const IMPORTS_KEPT = 16;

export class SimStore {
  /** Without a state store: the copied-in prefixes, oldest first. */
  private imports: TokenIds[] = [];
  /** The state store (spec.spill): stored token sequences in the order they were stored, each with its last use. */
  private readonly stored: StoredState[] = [];
  private nextId = 1;
  /** States kept and dropped since the last takeChanges (the real store reports them with a request's start). */
  private readonly changes = new StoreChangeLog();

  constructor(
    private readonly spill: SpillSpec | undefined,
    /** The card's true time model: a save and a load each take half its copyMs. */
    private readonly truth: TimeModel,
    private readonly now: () => number,
  ) {}

  /** Longest copied-in prefix of `tokens`; with a state store, the longest prefix a stored state shares with them. */
  prefixOf(tokens: TokenIds): number {
    if (this.spill) return this.bestPrefix(tokens)?.length ?? 0;
    let best = 0;
    for (const prefix of this.imports) {
      if (prefix.length > best && prefix.length <= tokens.length && commonPrefixLength(prefix, tokens) === prefix.length) best = prefix.length;
    }
    return best;
  }

  /** Whether a stored state holds all of `tokens` (a copy's source may export from its store); never without a state store. */
  holds(tokens: TokenIds): boolean {
    return this.spill !== undefined && (this.bestPrefix(tokens)?.length ?? 0) >= tokens.length;
  }

  /** Keeps a copied-in prefix (with a state store, as a stored state: the real worker adopts it). */
  import(tokens: TokenIds): void {
    if (this.spill) this.store(tokens);
    else this.imports = [...this.imports.filter((prefix) => prefix !== tokens), tokens].slice(-IMPORTS_KEPT);
  }

  /**
   * Gets a slot holding `held`, which shares `shared` tokens with the prompt `tokens`, ready for
   * it. With a state store, as the real worker's reuseSpilledState: save what the slot loses,
   * then load a better stored state. Without one, a longer copied-in prefix is used as it is.
   */
  prepareSlot(held: TokenIds, tokens: TokenIds, shared: number): SlotPreparation {
    const spill = this.spill;
    if (!spill) return { shared: Math.max(shared, this.prefixOf(tokens)), ioMs: 0, spilled: false, restored: false };
    let ioMs = 0;
    let spilled = false;
    let restored = false;
    // Chosen before the save, which must not drop it (as the real worker pins it).
    const found = this.bestPrefix(tokens);
    const best = found && found.length >= shared + spill.minRestoreGain ? found : undefined;
    if (best) best.entry.lastUsedMs = this.now();
    if (
      held.length - shared >= spill.minTokens &&
      !this.stored.some((entry) => entry.tokens.length >= held.length && commonPrefixLength(entry.tokens, held) === held.length)
    ) {
      this.store(held, best?.entry);
      spilled = true;
      ioMs += this.truth.copyMs(held.length) / 2;
    }
    if (best) {
      restored = true;
      ioMs += this.truth.copyMs(best.entry.tokens.length) / 2;
      shared = best.length;
    }
    return { shared, ioMs, spilled, restored };
  }

  /** The states kept and dropped since the last call (undefined when none), as the real worker reports them. */
  takeChanges(): StoreChanges | undefined {
    return this.changes.take();
  }

  /** The stored state sharing the longest prefix with `tokens` (the real store's bestPrefix). */
  private bestPrefix(tokens: TokenIds): { entry: StoredState; length: number } | undefined {
    let best: { entry: StoredState; length: number } | undefined;
    for (const entry of this.stored) {
      const length = commonPrefixLength(entry.tokens, tokens);
      if (length > 0 && (!best || length > best.length)) best = { entry, length };
    }
    return best;
  }

  /**
   * Adds a state to the store and drops what the real store's rule drops (`statesToDrop`: those
   * it supersedes, then the least recently used past the budget; a state bigger than the budget
   * is not kept); never `loading`, the state about to be loaded into the slot (the real worker
   * pins it).
   */
  private store(tokens: TokenIds, loading?: StoredState): void {
    const budget = this.spill!.budgetTokens;
    if (tokens.length > budget) return;
    const added: StoredState = { id: String(this.nextId++), tokens, lastUsedMs: this.now() };
    this.stored.push(added);
    this.changes.kept(added.id, tokens);
    for (const dropped of statesToDrop(
      this.stored,
      added,
      budget,
      (state) => state.tokens.length,
      (state) => state === loading,
    )) {
      this.changes.dropped(dropped.id);
      this.stored.splice(this.stored.indexOf(dropped), 1);
    }
  }
}
