// The lazy min-heap of a worker's cached leaves, keyed by (last access, node id), that LRU
// eviction takes from. How the tree works: docs/scheduler-tree.md.
import type { RadixNode } from "./node.js";

export interface HeapItem {
  readonly key: number;
  readonly node: RadixNode;
}

export function itemLess(a: HeapItem, b: HeapItem): boolean {
  return a.key < b.key || (a.key === b.key && a.node.id < b.node.id);
}

/** Binary min-heap on (key, node id). Entries go stale lazily; the owner filters them. */
export class LeafHeap {
  items: HeapItem[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): HeapItem | undefined {
    return this.items[0];
  }

  push(item: HeapItem): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p]!;
      if (!itemLess(item, parent)) break;
      a[i] = parent;
      i = p;
    }
    a[i] = item;
  }

  pop(): HeapItem | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (top === undefined || last === undefined || a.length === 0) return top;
    let i = 0;
    const n = a.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && itemLess(a[r]!, a[l]!) ? r : l;
      const child = a[c]!;
      if (!itemLess(child, last)) break;
      a[i] = child;
      i = c;
    }
    a[i] = last;
    return top;
  }

  /** Replaces the content with `items` (any order). */
  rebuild(items: HeapItem[]): void {
    items.sort((x, y) => (itemLess(x, y) ? -1 : itemLess(y, x) ? 1 : 0));
    this.items = items; // a sorted array is a valid heap
  }
}
