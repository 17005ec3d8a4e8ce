// What LRU eviction would take from one worker, found one entry at a time without changing
// anything (the placement policies price it for every worker they consider). How the tree
// works: docs/scheduler-tree.md.
import { BinaryHeap } from "../../common/binary-heap.js";
import { LeafHeap } from "./leaf-heap.js";
import type { Holder, RadixNode } from "./node.js";
import type { EvictionOrder } from "./types.js";
import { isLeafEntry, type WorkerCacheBook } from "./worker-cache-book.js";

/**
 * The order WorkerCacheBook.evict takes nodes in, replayed without touching the book: its
 * heap is read in place, in (last access, node id) order, by a second small heap of
 * positions in it (a position's children come after it), so nothing is popped or put back;
 * a parent whose cached children the plan has all taken becomes a leaf, and joins, at its
 * own last access, a side heap the two are merged from. Counts live in the holder records
 * under the plan's mark, so a plan allocates nothing.
 * Reused: one plan per tree, valid until the tree changes or the next plan starts.
 */
export class EvictionPlan implements EvictionOrder {
  private book: WorkerCacheBook | null = null;
  private heap: LeafHeap | null = null;
  /** Positions in `heap` not visited yet whose parent position was, by their entries' order. */
  private readonly frontier = new BinaryHeap<number>((a, b) => this.heap!.lessAt(a, b));
  private readonly exposed = new LeafHeap();
  private excess = 0;
  private freed = 0;
  private protectMark = 0;
  private mark = 0;

  /** Starts over: at least `excess` tokens from `book` (none: nothing), sparing nodes marked
   *  `protectMark`. The stale entries on top of the book's heap are dropped first (the only
   *  change, one that changes no order): a plan would pass over them, and the next one again. */
  start(book: WorkerCacheBook | null, excess: number, protectMark: number, mark: number): this {
    book?.dropStaleTop();
    this.book = book;
    this.heap = book?.heap ?? null;
    this.frontier.clear();
    if (this.heap !== null && this.heap.size > 0) this.frontier.push(0);
    this.exposed.clear();
    this.excess = excess;
    this.freed = 0;
    this.protectMark = protectMark;
    this.mark = mark;
    return this;
  }

  next(): RadixNode | undefined {
    const book = this.book;
    if (book === null) return undefined;
    const exposed = this.exposed;
    while (this.freed < this.excess) {
      const top = this.liveTop();
      let node: RadixNode;
      let h: Holder;
      if (exposed.size > 0 && (top < 0 || this.heap!.lessThanAt(exposed.keyAt(0), exposed.idAt(0), top))) {
        node = exposed.nodeAt(0);
        h = exposed.holderAt(0);
        exposed.pop();
      } else if (top >= 0) {
        this.popFrontier();
        node = this.heap!.nodeAt(top);
        h = this.heap!.holderAt(top);
      } else {
        break;
      }
      if (h.planMark === this.mark) continue; // a duplicate entry of a node already seen
      h.planMark = this.mark;
      if (h.inFlight > 0 || node.protectMark === this.protectMark) continue;
      this.freed += node.segLength;
      const parent = node.parent!;
      if (parent.parent !== null) {
        const ph = parent.holderOf(book)!;
        if (ph.exposeMark !== this.mark) {
          ph.exposeMark = this.mark;
          ph.exposeLeft = ph.heldChildren;
        }
        if (--ph.exposeLeft === 0) exposed.push(ph.lastAccess, parent, ph);
      }
      return node;
    }
    this.book = null;
    return undefined;
  }

  /** The position of the smallest heap entry not visited yet that stands for a leaf (stale
   *  ones are passed over), or -1. */
  private liveTop(): number {
    const heap = this.heap!;
    for (let at = this.frontier.peek(); at !== undefined; at = this.frontier.peek()) {
      if (isLeafEntry(heap.holderAt(at), heap.keyAt(at))) return at;
      this.popFrontier();
    }
    return -1;
  }

  /** Visits the frontier's smallest position: its children in the heap join the frontier. */
  private popFrontier(): void {
    const at = this.frontier.pop()!;
    const count = this.heap!.size;
    if (2 * at + 1 < count) this.frontier.push(2 * at + 1);
    if (2 * at + 2 < count) this.frontier.push(2 * at + 2);
  }
}
