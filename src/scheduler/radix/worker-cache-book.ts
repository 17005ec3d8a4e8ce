// One worker's account in the radix tree: its KV capacity and the tokens it caches, the
// LRU heap of its cached leaves and the eviction that takes from it, and its slot mirror.
// How the tree works: docs/scheduler-tree.md.
import { LeafHeap } from "./leaf-heap.js";
import { Holder, type RadixNode } from "./node.js";
import type { TokenTrie } from "./trie.js";
import type { EvictedEntry, WorkerAccount, WorkerId } from "./types.js";
import { emptyArray } from "../scratch.js";

const NO_ENTRIES: readonly EvictedEntry[] = Object.freeze([]);

export class WorkerCacheBook implements WorkerAccount {
  capacity = Number.POSITIVE_INFINITY;
  /** Tokens accounted to this worker. */
  used = 0;
  /** Set when the tree forgets the worker (its next book is a new one). */
  dropped = false;
  /** Nodes this worker caches (sizes the heap compaction). */
  nodes = 0;
  readonly heap = new LeafHeap();
  /** Per slot, the deepest node of what the slot holds (its length is that node's
   *  contextLength), null when empty: the whole slot mirror, one reference per slot. */
  readonly slots: (RadixNode | null)[] = [];
  /** Per slot, the requests running in it now (its tickets' reports; one, unless reports
   *  overlap). A slot with none is idle: its content is reusable by the next request. */
  running: Int32Array = new Int32Array(0);
  /** Scratch of `evict`: the entries it passed over, to go back in the heap. */
  private readonly passedKeys: number[] = [];
  private readonly passedNodes: RadixNode[] = [];
  private readonly passedHolders: Holder[] = [];

  constructor(
    readonly id: WorkerId,
    private readonly trie: TokenTrie,
  ) {}

  get reportsSlots(): boolean {
    return this.slots.length > 0;
  }

  /** The worker holds `node` (touched at `now`); its parent must be held already. Returns its record. */
  cache(node: RadixNode, now: number): Holder {
    let h = node.holderOf(this);
    if (h === undefined) {
      h = new Holder(this);
      node.holders.push(h);
    }
    if (!h.cached) {
      h.cached = true;
      h.heldChildren = 0;
      this.used += node.segLength;
      this.nodes++;
      const parent = node.parent!;
      if (parent !== this.trie.root) parent.holderOf(this)!.heldChildren++;
    }
    h.lastAccess = now;
    return h;
  }

  /** The worker no longer holds `node` (h: its record there), one of its leaves. */
  uncache(node: RadixNode, h: Holder): void {
    if (h.slotRefs > 0) {
      // Slots end here (the node is the worker's leaf when it goes): they now hold the
      // parent's prefix as far as the tree knows; the parent already counts them. The slot
      // last set to end here first: usually the only one, found without a scan of them all
      // (a worker may have hundreds, and an LRU eviction takes a slot's old content).
      const slots = this.slots;
      const parent = node.parent === this.trie.root ? null : node.parent;
      let left = h.slotRefs;
      let moved = h.slot;
      if (moved >= 0 && slots[moved] === node) {
        slots[moved] = parent;
        left--;
      }
      for (let i = 0; i < slots.length && left > 0; i++) {
        if (slots[i] === node) {
          slots[i] = parent;
          moved = i;
          left--;
        }
      }
      if (parent !== null) parent.holderOf(this)!.slot = moved;
      h.slotRefs = 0;
      h.idleSlotRefs = 0;
    }
    h.cached = false;
    h.heldChildren = 0;
    this.used -= node.segLength;
    this.nodes--;
    if (h.inFlight === 0) node.removeHolder(h);
    const parent = node.parent!;
    if (parent !== this.trie.root) {
      const ph = parent.holderOf(this)!;
      ph.heldChildren--;
      if (ph.heldChildren === 0 && ph.cached) this.pushLeaf(parent, ph);
    }
  }

  /** Uncaches `node`, which the worker caches, and everything it caches below it, every
   *  node after all of its descendants; prunes what nobody else has. Returns the tokens
   *  freed. */
  uncacheSubtree(node: RadixNode): number {
    const h = node.holderOf(this)!;
    let freed = 0;
    if (h.heldChildren > 0) {
      const order: RadixNode[] = [];
      const stack: RadixNode[] = [];
      for (const c of node.children.values()) if (c.holderOf(this)?.cached) stack.push(c);
      while (stack.length > 0) {
        const x = stack.pop()!;
        order.push(x);
        for (const c of x.children.values()) if (c.holderOf(this)?.cached) stack.push(c);
      }
      for (let j = order.length - 1; j >= 0; j--) {
        const x = order[j]!;
        freed += x.segLength;
        this.uncache(x, x.holderOf(this)!);
        this.trie.prune(x);
      }
    }
    freed += node.segLength;
    this.uncache(node, h);
    this.trie.prune(node);
    return freed;
  }

  /**
   * A slot no longer holds the path that ends at `node` (null: it held nothing). Every node
   * of it loses one slot reference; one that no slot holds any more and that has no request
   * of the worker in flight is dropped with what the worker caches below it (orphans: every
   * slot and every request in flight that reaches below a node reaches the node). Returns the
   * tokens the worker no longer holds.
   */
  releaseSlot(node: RadixNode | null, idle: boolean): number {
    let freed = 0;
    while (node !== null && node !== this.trie.root) {
      const parent: RadixNode = node.parent!;
      const h = node.holderOf(this)!;
      h.slotRefs--;
      if (idle) h.idleSlotRefs--;
      if (h.slotRefs === 0 && h.inFlight === 0 && h.cached) freed += this.uncacheSubtree(node);
      node = parent;
    }
    return freed;
  }

  /** Whether no request runs in `slot` now. */
  isIdle(slot: number): boolean {
    return (this.running[slot] ?? 0) === 0;
  }

  /** One more (`delta` 1) or one fewer (-1) request runs in `slot`; when the slot turns busy
   *  or idle, every node of its content counts it as idle no more, or again. */
  countRunning(slot: number, delta: 1 | -1): void {
    if (slot >= this.running.length) {
      const grown = new Int32Array(Math.max(slot + 1, 2 * this.running.length));
      grown.set(this.running);
      this.running = grown;
    }
    const before = this.running[slot]!;
    const after = Math.max(0, before + delta);
    this.running[slot] = after;
    if ((before === 0) === (after === 0)) return;
    const change = after === 0 ? 1 : -1;
    for (let node = this.slots[slot] ?? null; node !== null && node !== this.trie.root; node = node.parent) {
      node.holderOf(this)!.idleSlotRefs += change;
    }
  }

  /** `node` (h: the worker's record there) is one of the worker's leaves at its last access. */
  pushLeaf(node: RadixNode, h: Holder): void {
    if (h.heapKey === h.lastAccess) return; // that very entry is in the heap
    h.heapKey = h.lastAccess;
    this.heap.push(h.lastAccess, node, h);
  }

  /** Pops the stale entries off the top of the heap (what eviction would pass over first). */
  dropStaleTop(): void {
    const heap = this.heap;
    while (heap.size > 0 && !isLeafEntry(heap.holderAt(0), heap.keyAt(0))) this.popTop();
  }

  /** Removes the top entry of the heap. */
  private popTop(): void {
    const heap = this.heap;
    const h = heap.holderAt(0);
    if (h.heapKey === heap.keyAt(0)) h.heapKey = Number.NaN;
    heap.pop();
  }

  /** Drops stale heap entries once they outnumber the live ones. */
  maybeCompact(): void {
    const heap = this.heap;
    if (heap.size <= 2 * this.nodes + 64) return;
    const mark = this.trie.newPlanMark();
    heap.filter((h, key) => {
      if (h.planMark === mark) return false; // the record has an entry kept already
      if (!isLeafEntry(h, key)) {
        if (h.heapKey === key) h.heapKey = Number.NaN;
        return false;
      }
      h.planMark = mark;
      h.heapKey = key;
      return true;
    });
  }

  /**
   * LRU eviction of at least `excess` tokens from the worker, leaf first, skipping nodes in
   * flight on it and nodes marked with `protectMark`. With `report`, returns what it evicted,
   * in order (each entry's node keeps its tokens: see TokenTrie.keepTokens); without, the
   * empty list. (EvictionPlan runs the same order without changing anything.)
   */
  evict(excess: number, protectMark: number, report: boolean): readonly EvictedEntry[] {
    if (!(excess > 0)) return report ? [] : NO_ENTRIES;
    const out: EvictedEntry[] | null = report ? [] : null;
    const heap = this.heap;
    const passedKeys = this.passedKeys;
    const passedNodes = this.passedNodes;
    const mark = this.trie.newPlanMark();
    let freed = 0;
    while (freed < excess) {
      this.dropStaleTop();
      if (heap.size === 0) break;
      const key = heap.keyAt(0);
      const node = heap.nodeAt(0);
      const h = heap.holderAt(0);
      this.popTop();
      if (h.planMark === mark) continue; // a duplicate entry of a node already seen
      h.planMark = mark;
      if (h.inFlight > 0 || node.protectMark === protectMark) {
        passedKeys.push(key);
        passedNodes.push(node);
        this.passedHolders.push(h);
        continue;
      }
      const lastAccess = h.lastAccess;
      freed += node.segLength;
      this.uncache(node, h);
      this.trie.prune(node, out !== null);
      if (out !== null) {
        out.push({ workerId: this.id, node, tokens: node.segLength, contextLength: node.contextLength, lastAccess });
      }
    }
    for (let i = 0; i < passedNodes.length; i++) {
      const h = this.passedHolders[i]!;
      h.heapKey = passedKeys[i]!;
      heap.push(passedKeys[i]!, passedNodes[i]!, h);
    }
    emptyArray(this.passedHolders);
    emptyArray(passedKeys);
    emptyArray(passedNodes);
    return out ?? NO_ENTRIES;
  }
}

/** Whether a heap entry (its holder record and key) stands for one of the worker's leaves as
 *  it is now; else it is stale. */
export function isLeafEntry(h: Holder, key: number): boolean {
  return h.cached && h.heldChildren === 0 && h.lastAccess === key;
}
