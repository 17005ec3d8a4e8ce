// One worker's account in the radix tree: its KV capacity and the tokens it caches, the
// LRU heap of its cached leaves and the eviction that takes from it, and its slot mirror.
// How the tree works: docs/scheduler-tree.md.
import { itemLess, LeafHeap, type HeapItem } from "./leaf-heap.js";
import { Holder, type RadixNode } from "./node.js";
import type { TokenTrie } from "./trie.js";
import type { EvictedEntry, WorkerId } from "./types.js";

export class WorkerCacheBook {
  capacity = Number.POSITIVE_INFINITY;
  /** Tokens accounted to this worker. */
  used = 0;
  /** Nodes this worker caches (sizes the heap compaction). */
  nodes = 0;
  readonly heap = new LeafHeap();
  /** Per slot, the deepest node of what the slot holds (its length is that node's
   *  contextLength), null when empty: the whole slot mirror, one reference per slot. */
  readonly slots: (RadixNode | null)[] = [];

  constructor(
    readonly id: WorkerId,
    private readonly trie: TokenTrie,
  ) {}

  /** The worker holds `node` (touched at `now`); its parent must be held already. */
  cache(node: RadixNode, now: number): void {
    let h = node.holder(this.id);
    if (h === undefined) {
      h = new Holder(this.id);
      node.holders.push(h);
    }
    if (!h.cached) {
      h.cached = true;
      h.heldChildren = 0;
      this.used += node.seg.length;
      this.nodes++;
      const parent = node.parent!;
      if (parent !== this.trie.root) parent.holder(this.id)!.heldChildren++;
    }
    h.lastAccess = now;
  }

  /** The worker no longer holds `node` (h: its record there), one of its leaves. */
  uncache(node: RadixNode, h: Holder): void {
    if (h.slotRefs > 0) {
      // Slots end here (the node is the worker's leaf when it goes): they now hold the
      // parent's prefix as far as the tree knows; the parent already counts them.
      const slots = this.slots;
      const parent = node.parent === this.trie.root ? null : node.parent;
      for (let i = 0, left = h.slotRefs; i < slots.length && left > 0; i++) {
        if (slots[i] === node) {
          slots[i] = parent;
          left--;
        }
      }
      h.slotRefs = 0;
    }
    h.cached = false;
    h.heldChildren = 0;
    this.used -= node.seg.length;
    this.nodes--;
    if (h.inFlight === 0) node.removeHolder(h);
    const parent = node.parent!;
    if (parent !== this.trie.root) {
      const ph = parent.holder(this.id)!;
      ph.heldChildren--;
      if (ph.heldChildren === 0 && ph.cached) this.pushLeaf(parent, ph);
    }
  }

  /** Uncaches `node`, which the worker caches, and everything it caches below it, every
   *  node after all of its descendants; prunes what nobody else has. Returns the tokens
   *  freed. */
  uncacheSubtree(node: RadixNode): number {
    const h = node.holder(this.id)!;
    let freed = 0;
    if (h.heldChildren > 0) {
      const order: RadixNode[] = [];
      const stack: RadixNode[] = [];
      for (const c of node.children.values()) if (c.isCachedOn(this.id)) stack.push(c);
      while (stack.length > 0) {
        const x = stack.pop()!;
        order.push(x);
        for (const c of x.children.values()) if (c.isCachedOn(this.id)) stack.push(c);
      }
      for (let j = order.length - 1; j >= 0; j--) {
        const x = order[j]!;
        freed += x.seg.length;
        this.uncache(x, x.holder(this.id)!);
        this.trie.prune(x);
      }
    }
    freed += node.seg.length;
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
  releaseSlot(node: RadixNode | null): number {
    let freed = 0;
    while (node !== null && node !== this.trie.root) {
      const parent: RadixNode = node.parent!;
      const h = node.holder(this.id)!;
      h.slotRefs--;
      if (h.slotRefs === 0 && h.inFlight === 0 && h.cached) freed += this.uncacheSubtree(node);
      node = parent;
    }
    return freed;
  }

  /** `node` (h: the worker's record there) is one of the worker's leaves at its last access. */
  pushLeaf(node: RadixNode, h: Holder): void {
    this.heap.push({ key: h.lastAccess, node });
  }

  private isLeafItem(item: HeapItem): boolean {
    const h = item.node.holder(this.id);
    return h?.cached === true && h.heldChildren === 0 && h.lastAccess === item.key;
  }

  /** Drops stale heap entries once they outnumber the live ones. */
  maybeCompact(): void {
    const heap = this.heap;
    if (heap.size <= 2 * this.nodes + 64) return;
    const mark = this.trie.newPlanMark();
    const keep: HeapItem[] = [];
    for (const item of heap.entries()) {
      if (!this.isLeafItem(item)) continue;
      const h = item.node.holder(this.id)!;
      if (h.planMark === mark) continue;
      h.planMark = mark;
      keep.push(item);
    }
    heap.rebuild(keep);
  }

  /**
   * LRU eviction of at least `excess` tokens from the worker, leaf first, skipping nodes in
   * flight on it and nodes marked with `protectMark`. With apply = false nothing changes
   * (parents exposed by a simulated eviction go to a side heap).
   */
  planEviction(excess: number, protectMark: number, apply: boolean): EvictedEntry[] {
    const out: EvictedEntry[] = [];
    if (!(excess > 0)) return out;
    const heap = this.heap;
    const putBack: HeapItem[] = [];
    const exposed = apply ? null : new LeafHeap();
    const remaining = apply ? null : new Map<RadixNode, number>();
    const mark = this.trie.newPlanMark();
    let freed = 0;
    while (freed < excess) {
      let top = heap.peek();
      while (top !== undefined && !this.isLeafItem(top)) {
        heap.pop();
        top = heap.peek();
      }
      const alt = exposed?.peek();
      let item: HeapItem;
      let fromMain: boolean;
      if (alt !== undefined && (top === undefined || itemLess(alt, top))) {
        item = exposed!.pop()!;
        fromMain = false;
      } else if (top !== undefined) {
        item = heap.pop()!;
        fromMain = true;
      } else {
        break;
      }
      const node = item.node;
      const h = node.holder(this.id)!;
      if (h.planMark === mark) continue; // a duplicate entry of a node already seen
      h.planMark = mark;
      if (h.inFlight > 0 || node.protectMark === protectMark) {
        if (fromMain) putBack.push(item);
        continue;
      }
      out.push({ workerId: this.id, node, tokens: node.seg.length, contextLength: node.contextLength, lastAccess: h.lastAccess });
      freed += node.seg.length;
      if (apply) {
        this.uncache(node, h);
        this.trie.prune(node);
      } else {
        if (fromMain) putBack.push(item);
        const parent = node.parent!;
        if (parent !== this.trie.root) {
          const ph = parent.holder(this.id)!;
          const left = (remaining!.get(parent) ?? ph.heldChildren) - 1;
          remaining!.set(parent, left);
          if (left === 0) exposed!.push({ key: ph.lastAccess, node: parent });
        }
      }
    }
    for (const item of putBack) heap.push(item);
    return out;
  }
}
