// What one worker keeps in its state store, as its reports say: the KV states it saved when
// a slot was reused (or adopted from another worker's copy), each by the worker's id for it
// and the tokens it holds. A slot keeps a conversation only until another request needs the
// slot; the store keeps it after that, and loading it back into a slot costs a fraction of
// computing it again. The tree sees only the slots, so without these the scheduler places an
// agent's next turn as if its history were gone from every worker.
import { commonPrefixLength, sharedTokenCount, type TokenIds } from "../../common/tokens.js";

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

/**
 * A stored state is dropped when a newer one holds all of it but a tail shorter than this
 * fraction of its length. Two prompts of one long shared prefix (a tool list, a document)
 * with questions of their own would otherwise each keep a whole copy of the prefix: on
 * Preble's ToolBench (85 % of a prompt shared) a card's store of about 35 prompts kept a
 * whole copy of a prefix for each question, and lost other prefixes to make room
 * (bench/sim/prefix-trace.ts shows where requests then found their prefix). A state that a newer one
 * continues (the same conversation, a turn later) is dropped too; two conversations that
 * share only their system prompt keep both once their own parts are a quarter or more.
 * What a dropped state held past the shared part is at most a quarter of it to compute again.
 */
export const SUPERSEDED_TAIL = 0.25;

/** Whether a store keeping `newer` may drop `older`: all of it but a tail under SUPERSEDED_TAIL of its length is in `newer`. */
export function supersedes(newer: TokenIds, older: TokenIds): boolean {
  return older.length - commonPrefixLength(older, newer) < SUPERSEDED_TAIL * older.length;
}

/** A stored state as a store's admission rule reads it. */
export interface KeptState {
  readonly tokens: TokenIds;
  readonly lastUsedMs: number;
}

/**
 * What a store drops when it keeps `added` (already last in `states`): the states `added`
 * supersedes, then the least recently used while the rest's `sizeOf` sum exceeds `budget`
 * (`added` itself included, when all else is in use). Never a state `inUse` (being loaded):
 * past the budget with only those left, the store stays over it until they are released.
 * The worker's state store and the simulator's both keep their states by this rule.
 */
export function statesToDrop<S extends KeptState>(
  states: readonly S[],
  added: S,
  budget: number,
  sizeOf: (state: S) => number,
  inUse: (state: S) => boolean,
): S[] {
  const drops: S[] = [];
  const left: S[] = [];
  let total = 0;
  for (const state of states) {
    if (state !== added && !inUse(state) && supersedes(added.tokens, state.tokens)) drops.push(state);
    else {
      left.push(state);
      total += sizeOf(state);
    }
  }
  while (total > budget) {
    let oldest = -1;
    for (let i = 0; i < left.length; i++) if (!inUse(left[i]!) && (oldest < 0 || left[i]!.lastUsedMs < left[oldest]!.lastUsedMs)) oldest = i;
    if (oldest < 0) break;
    const [dropped] = left.splice(oldest, 1);
    drops.push(dropped!);
    total -= sizeOf(dropped!);
  }
  return drops;
}

/**
 * A store's side of the reports: what it kept and dropped since the last report was taken,
 * in that order. The worker's state store and the simulator's keep one each.
 */
export class StoreChangeLog {
  private changes: { stored: { id: string; tokens: TokenIds }[]; dropped: string[] } = { stored: [], dropped: [] };

  kept(id: string, tokens: TokenIds): void {
    this.changes.stored.push({ id, tokens });
  }

  dropped(id: string): void {
    this.changes.dropped.push(id);
  }

  /** The changes since the last call (undefined when none); the log starts again empty. */
  take(): StoreChanges | undefined {
    const changes = this.changes;
    if (changes.stored.length === 0 && changes.dropped.length === 0) return undefined;
    this.changes = { stored: [], dropped: [] };
    return changes;
  }
}

/** One stored state, with how many tokens it shares with the state before it in the list. */
interface StoredState {
  id: string;
  tokens: TokenIds;
  sharedWithPrevious: number;
}

export class StoredStates {
  /** In the order they were reported, the oldest first. */
  private readonly states: StoredState[] = [];
  private readonly byId = new Map<string, StoredState>();

  get size(): number {
    return this.states.length;
  }

  /** Applies a worker's report: its new states, then the ones it dropped. */
  apply(changes: StoreChanges): void {
    for (const { id, tokens } of changes.stored) {
      this.remove(id);
      const last = this.states[this.states.length - 1];
      const state = { id, tokens, sharedWithPrevious: last ? commonPrefixLength(last.tokens, tokens) : 0 };
      this.states.push(state);
      this.byId.set(id, state);
    }
    for (const id of changes.dropped) this.remove(id);
    while (this.states.length > MAX_STORED_STATES) this.remove(this.states[0]!.id);
  }

  /** The worker restarted or left: its store went with it. Returns the ids it held. */
  clear(): string[] {
    const ids = this.states.map((state) => state.id);
    this.states.length = 0;
    this.byId.clear();
    return ids;
  }

  /** Every state, oldest report first. */
  *entries(): IterableIterator<{ id: string; tokens: TokenIds }> {
    for (const { id, tokens } of this.states) yield { id, tokens };
  }

  /**
   * The longest prefix of `prompt` a stored state holds, when it is longer than `atLeast`
   * (what the worker's slots give already); else 0. A state that goes on past the prompt
   * counts for what it shares: the worker loads it and drops the rest.
   *
   * One walk down the list, each state compared from where the one before it left off: what
   * the prompt shares with a state follows from what it shares with the previous state and
   * what the two states share, unless those are equal (then the comparison goes on from
   * there). An agent's stored turns share its long system prompt: compared one by one, each
   * cost a walk through it (51 us per call for 64 states sharing 1,500 tokens).
   */
  longestPrefix(prompt: TokenIds, atLeast: number): number {
    let best = 0;
    let shared = 0;
    for (let i = 0; i < this.states.length; i++) {
      const { tokens, sharedWithPrevious } = this.states[i]!;
      if (i === 0 || sharedWithPrevious === shared) {
        const from = i === 0 ? 0 : shared;
        shared = from + sharedTokenCount(tokens, from, prompt, from, Math.min(tokens.length, prompt.length) - from);
      } else shared = Math.min(shared, sharedWithPrevious);
      if (shared > best) best = shared;
    }
    return best > atLeast ? best : 0;
  }

  private remove(id: string): void {
    const state = this.byId.get(id);
    if (state === undefined) return;
    this.byId.delete(id);
    const index = this.states.indexOf(state);
    this.states.splice(index, 1);
    const next = this.states[index];
    if (next) next.sharedWithPrevious = index === 0 ? 0 : commonPrefixLength(this.states[index - 1]!.tokens, next.tokens);
  }
}
