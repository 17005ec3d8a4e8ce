// The local scheduler of one worker (Preble's `fcfs-mpq` in its SGLang fork): which waiting
// request gets the next free slot (sequence) of the worker's context, and which slot.
//
// Priority groups: a waiting request's hit ratio on THIS worker is the longest prefix of its
// prompt that the worker already holds (in a slot, or in a spilled state it can load back)
// over its prompt length. With P groups (Preble: P = 10), group = ceil(hit x P) - 1, and 0
// for no hit. Groups are served round-robin from the highest: in one pass group g admits up
// to (g + 1) x k requests (Preble: k = 10), first come first served inside a group; a pass
// ends when every group has used its quota or has nobody waiting. High-hit requests are
// mostly decode, so they go first without starving misses.
//
// Slots: a request takes the idle slot sharing the longest prefix with its prompt (its KV is
// reused, only the suffix is evaluated); with no shared prefix anywhere, the least recently
// used idle slot, whose cache is the cheapest to lose. A prefix counts as shared only when it
// is at least half of the slot's content or half of the prompt (llama-server's slot
// similarity, 0.5): every chat prompt starts with the same few template tokens, and those
// must not make a request throw away another conversation's long cache. Busy slots are kept
// side by side where that costs no reuse: among equally long shared prefixes, and before
// recency when nothing is shared, a slot next to a busy one goes first (a decode step over
// slots 0 and 2 is two passes over the weights, over 0 and 1 one). What a request with no
// shared prefix evicts that way is at worst a more recent cache than the LRU one, and the
// worker spills a recent cache to its state store before overwriting it.
//
// KV capacity: llama.cpp gives every sequence its own `contextSize` cells, so a running
// sequence and the prefix it keeps cached draw on that slot's cells alone: admitting by
// slots is admitting by capacity (the host refuses prompts + max_tokens beyond a slot).
//
// Pure: no llama.cpp, an injected clock; the worker thread feeds it the slots' tokens.
import { commonPrefixLength, type TokenIds } from "../common/tokens.js";
import { groupOfHit } from "./batch-priority.js";
import type { LocalSchedulerSettings } from "./local-scheduler-settings.js";

/** What admission reads of the settings: P and k. */
type GroupSettings = Pick<LocalSchedulerSettings, "priorityGroups" | "quotaPerGroup">;

export interface LocalSchedulerOptions extends GroupSettings {
  slots: number;
  now?: () => number;
}

export interface SlotGrant {
  slot: number;
  /** Tokens the chosen slot already holds that match the prompt's start. */
  sharedPrefix: number;
  /** The priority group the request was admitted from. */
  group: number;
}

/** Where a request's prefix may already be: the worker's slots, and optionally its spilled states. */
export interface PrefixSources {
  tokensOfSlot(slot: number): TokenIds;
  /** Longest prefix of `tokens` the worker can load back from its state store (0 if none). */
  spilledPrefix?(tokens: TokenIds): number;
}

interface Waiting {
  id: string;
  tokens: TokenIds;
  resolve: (grant: SlotGrant | undefined) => void;
}

export class LocalScheduler {
  private options: LocalSchedulerOptions;
  private readonly busy: boolean[];
  private readonly lastUsedMs_: number[];
  private waiting: Waiting[] = [];
  /** Round-robin state: the group served now and what each group admitted in this pass. */
  private currentGroup: number;
  private admittedInPass: number[];
  private readonly now: () => number;

  constructor(
    options: LocalSchedulerOptions,
    private readonly sources: PrefixSources,
  ) {
    this.options = options;
    this.busy = new Array<boolean>(options.slots).fill(false);
    this.lastUsedMs_ = new Array<number>(options.slots).fill(-Infinity);
    this.admittedInPass = new Array<number>(options.priorityGroups).fill(0);
    this.currentGroup = options.priorityGroups - 1;
    this.now = options.now ?? Date.now;
  }

  get busyCount(): number {
    return this.busy.filter(Boolean).length;
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Hot reload: new P and k; the round-robin starts a fresh pass from the highest group. */
  configure(groups: GroupSettings): void {
    this.options = { ...this.options, ...groups };
    this.admittedInPass = new Array<number>(groups.priorityGroups).fill(0);
    this.currentGroup = groups.priorityGroups - 1;
    this.dispatch();
  }

  /** Whether a request holds the slot now. */
  isBusy(slot: number): boolean {
    return this.busy[slot] === true;
  }

  /** Waiting requests per priority group (index = group, 0 = lowest hit ratio). */
  waitingByGroup(): number[] {
    const counts = new Array<number>(this.options.priorityGroups).fill(0);
    for (const request of this.waiting) counts[this.groupOf(request.tokens)]!++;
    return counts;
  }

  /** When the slot last finished a request (-Infinity if never). */
  lastUsedMs(slot: number): number {
    return this.lastUsedMs_[slot] ?? -Infinity;
  }

  /**
   * Reserves the first idle slot that satisfies `accept` (for work outside the queue, such as
   * exporting its state); release() it afterwards. undefined when none qualifies.
   */
  reserveIdle(accept: (slot: number) => boolean): number | undefined {
    for (let slot = 0; slot < this.options.slots; slot++) {
      if (!this.busy[slot] && accept(slot)) {
        this.busy[slot] = true;
        return slot;
      }
    }
    return undefined;
  }

  /** Longest prefix of `tokens` this worker holds, in a slot or spilled. */
  cachedPrefix(tokens: TokenIds): number {
    let best = this.sources.spilledPrefix?.(tokens) ?? 0;
    for (let slot = 0; slot < this.options.slots; slot++) best = Math.max(best, commonPrefixLength(this.sources.tokensOfSlot(slot), tokens));
    return best;
  }

  /** Preble's group of a waiting request (groupOfHit). */
  groupOf(tokens: TokenIds): number {
    if (tokens.length === 0) return 0;
    return groupOfHit(this.cachedPrefix(tokens) / tokens.length, this.options.priorityGroups);
  }

  /**
   * Resolves with a slot reserved for the request (call release() when it ends), or with
   * undefined when cancel(id) removed it from the queue first.
   */
  acquire(id: string, tokens: TokenIds): Promise<SlotGrant | undefined> {
    return new Promise((resolve) => {
      this.waiting.push({ id, tokens, resolve });
      this.dispatch();
    });
  }

  /** Takes a waiting request out of the queue; false when it already has a slot. */
  cancel(id: string): boolean {
    const index = this.waiting.findIndex((request) => request.id === id);
    if (index < 0) return false;
    const [request] = this.waiting.splice(index, 1);
    request!.resolve(undefined);
    return true;
  }

  release(slot: number): void {
    this.busy[slot] = false;
    this.lastUsedMs_[slot] = this.now();
    this.dispatch();
  }

  /** Fills idle slots from the queue, groups round-robin from the highest. */
  private dispatch(): void {
    while (this.waiting.length > 0 && this.busy.includes(false)) {
      const next = this.nextRequest();
      if (!next) return;
      const { request, group } = next;
      const { slot, sharedPrefix } = this.pickIdleSlot(request.tokens);
      this.busy[slot] = true;
      request.resolve({ slot, sharedPrefix, group });
    }
  }

  private nextRequest(): { request: Waiting; group: number } | undefined {
    // Groups are recomputed at every admission: what the slots hold changes as requests run.
    const groups = this.waiting.map((request) => this.groupOf(request.tokens));
    const groupCount = this.options.priorityGroups;
    // Two full sweeps at most: the rest of this pass, then a fresh pass.
    for (let step = 0; step < 2 * groupCount; step++) {
      const group = this.currentGroup;
      const quota = (group + 1) * this.options.quotaPerGroup;
      if (this.admittedInPass[group]! < quota) {
        const index = groups.indexOf(group);
        if (index >= 0) {
          this.admittedInPass[group]!++;
          const [request] = this.waiting.splice(index, 1);
          return { request: request!, group };
        }
      }
      this.currentGroup--;
      if (this.currentGroup < 0) {
        this.currentGroup = groupCount - 1;
        this.admittedInPass.fill(0);
      }
    }
    return undefined;
  }

  private pickIdleSlot(tokens: TokenIds): { slot: number; sharedPrefix: number } {
    // The longest similar prefix; without one, the fewest runs added, then the least recently used.
    let similar: { slot: number; sharedPrefix: number; runsAdded: number } | undefined;
    let unshared: { slot: number; sharedPrefix: number; runsAdded: number; lastUsed: number } | undefined;
    for (let slot = 0; slot < this.options.slots; slot++) {
      if (this.busy[slot]) continue;
      const held = this.sources.tokensOfSlot(slot);
      const sharedPrefix = commonPrefixLength(held, tokens);
      const runsAdded = this.runsAddedBy(slot);
      const isSimilar = sharedPrefix > 0 && (2 * sharedPrefix >= held.length || 2 * sharedPrefix >= tokens.length);
      if (isSimilar && (!similar || sharedPrefix > similar.sharedPrefix || (sharedPrefix === similar.sharedPrefix && runsAdded < similar.runsAdded))) {
        similar = { slot, sharedPrefix, runsAdded };
      }
      const lastUsed = this.lastUsedMs_[slot]!;
      if (!unshared || runsAdded < unshared.runsAdded || (runsAdded === unshared.runsAdded && lastUsed < unshared.lastUsed)) {
        unshared = { slot, sharedPrefix, runsAdded, lastUsed };
      }
    }
    const chosen = similar ?? unshared!;
    return { slot: chosen.slot, sharedPrefix: chosen.sharedPrefix };
  }

  /**
   * How many more runs of consecutive busy slots there would be with `slot` busy too: 1 for
   * a slot with no busy neighbour, 0 next to one run, -1 between two. llama.cpp puts the tokens
   * of several sequences into one micro-batch only while their sequence ids are consecutive
   * (each sequence has its own KV stream, and a micro-batch takes a contiguous range of them),
   * and every micro-batch is one more pass over the weights: generating in slots 0 and 2 made
   * each decode step two passes (docs/engine.md, "Slots side by side").
   */
  private runsAddedBy(slot: number): number {
    return 1 - (this.busy[slot - 1] ? 1 : 0) - (this.busy[slot + 1] ? 1 : 0);
  }
}
