// A binary min-heap under a less-than function: the simulator's event queue and the order an
// eviction plan reads a worker's leaf heap in both take from one. (The leaf heap itself keeps
// its entries in typed arrays: radix/leaf-heap.ts.)

/** Binary min-heap under `less`. Equal items come out in no set order: where order matters, `less` breaks ties. */
export class BinaryHeap<T> {
  private items: T[] = [];

  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    let i = a.length;
    a.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(item, a[parent]!)) break;
      a[i] = a[parent]!;
      i = parent;
    }
    a[i] = item;
  }

  /** Empties the heap (its array is kept for reuse). */
  clear(): void {
    const a = this.items;
    while (a.length > 0) a.pop();
  }

  /** Every item, in heap order (not sorted). */
  entries(): readonly T[] {
    return this.items;
  }

  /** Replaces the content with `items` (any order; the array is taken, not copied). */
  rebuild(items: T[]): void {
    // A sorted array is a valid heap.
    items.sort((x, y) => (this.less(x, y) ? -1 : this.less(y, x) ? 1 : 0));
    this.items = items;
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (last === undefined || a.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= a.length) break;
      const right = left + 1;
      const child = right < a.length && this.less(a[right]!, a[left]!) ? right : left;
      if (!this.less(a[child]!, last)) break;
      a[i] = a[child]!;
      i = child;
    }
    a[i] = last;
    return top;
  }
}
