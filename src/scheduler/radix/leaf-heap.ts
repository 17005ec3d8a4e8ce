// The lazy min-heap of a worker's cached leaves, keyed by (last access, node id), that LRU
// eviction takes from. How the tree works: docs/scheduler-tree.md.
import { BinaryHeap } from "../../common/binary-heap.js";
import type { RadixNode } from "./node.js";

export interface HeapItem {
  readonly key: number;
  readonly node: RadixNode;
}

export function itemLess(a: HeapItem, b: HeapItem): boolean {
  return a.key < b.key || (a.key === b.key && a.node.id < b.node.id);
}

/** Binary min-heap on (key, node id). Entries go stale lazily; the owner filters them. */
export class LeafHeap extends BinaryHeap<HeapItem> {
  constructor() {
    super(itemLess);
  }
}
