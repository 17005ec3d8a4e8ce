// Which sequence (KV slot) of a worker's context a request runs in. Pure bookkeeping, no
// llama.cpp: the worker thread asks it for a slot and hands back the slot's current tokens.
//
// Rule: among idle slots take the one whose tokens share the longest prefix with the prompt
// (its KV is reused, only the suffix is evaluated); with no shared prefix anywhere take the
// least recently used idle slot, whose cache is the cheapest to lose. When every slot is
// busy, requests wait first-come first-served.
import { commonPrefixLength, type TokenIds } from "../common/tokens.js";

export interface SlotPick {
  slot: number;
  /** Tokens the chosen slot already holds that match the prompt's start. */
  sharedPrefix: number;
}

interface Waiter {
  prompt: TokenIds;
  resolve: (pick: SlotPick) => void;
}

export class SlotTable {
  private readonly busy: boolean[];
  private readonly lastUsedMs: number[];
  private readonly waiting: Waiter[] = [];

  constructor(
    readonly size: number,
    private readonly tokensOf: (slot: number) => TokenIds,
    private readonly now: () => number = Date.now,
  ) {
    this.busy = new Array<boolean>(size).fill(false);
    this.lastUsedMs = new Array<number>(size).fill(-Infinity);
  }

  get busyCount(): number {
    return this.busy.filter(Boolean).length;
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Resolves with a slot reserved for this prompt; call release() when the request ends. */
  acquire(prompt: TokenIds): Promise<SlotPick> {
    const pick = this.pickIdle(prompt);
    if (pick) {
      this.busy[pick.slot] = true;
      return Promise.resolve(pick);
    }
    return new Promise((resolve) => this.waiting.push({ prompt, resolve }));
  }

  release(slot: number): void {
    this.busy[slot] = false;
    this.lastUsedMs[slot] = this.now();
    const next = this.waiting.shift();
    if (!next) return;
    const pick = this.pickIdle(next.prompt);
    if (!pick) throw new Error("SlotTable: a released slot is not idle");
    this.busy[pick.slot] = true;
    next.resolve(pick);
  }

  private pickIdle(prompt: TokenIds): SlotPick | undefined {
    let best: SlotPick | undefined;
    let bestLastUsed = Infinity;
    for (let slot = 0; slot < this.size; slot++) {
      if (this.busy[slot]) continue;
      const sharedPrefix = commonPrefixLength(this.tokensOf(slot), prompt);
      const lastUsed = this.lastUsedMs[slot] ?? -Infinity;
      const better =
        !best || sharedPrefix > best.sharedPrefix || (sharedPrefix === best.sharedPrefix && lastUsed < bestLastUsed);
      if (better) {
        best = { slot, sharedPrefix };
        bestLastUsed = lastUsed;
      }
    }
    return best;
  }
}
