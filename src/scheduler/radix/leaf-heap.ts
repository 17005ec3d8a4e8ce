// The lazy min-heap of a worker's cached leaves, keyed by (last access, node id), that LRU
// eviction takes from. How the tree works: docs/scheduler-tree.md.
import type { Holder, RadixNode } from "./node.js";

/**
 * Binary min-heap on (key, node id). Entries go stale lazily; the owner filters them. Each
 * entry also keeps the worker's holder record of the node as it was when pushed: the
 * record says whether the entry is stale without a search of the node's records (a
 * record that leaves its node is never cached again, so an entry of an old record is stale).
 *
 * The keys and ids are kept in typed arrays beside the nodes, not in an object per entry:
 * sifting then compares numbers that lie together instead of visiting an object per step
 * (eviction takes the least recently used leaves, whose objects are the least likely to be
 * in the CPU's caches), and a push allocates nothing.
 */
export class LeafHeap {
  private keys = new Float64Array(16);
  private ids = new Float64Array(16);
  private nodes: (RadixNode | null)[] = [];
  private holders: (Holder | null)[] = [];
  size = 0;

  keyAt(i: number): number {
    return this.keys[i]!;
  }

  idAt(i: number): number {
    return this.ids[i]!;
  }

  nodeAt(i: number): RadixNode {
    return this.nodes[i]!;
  }

  holderAt(i: number): Holder {
    return this.holders[i]!;
  }

  /** Whether entry i comes before entry j. */
  lessAt(i: number, j: number): boolean {
    const ki = this.keys[i]!;
    const kj = this.keys[j]!;
    return ki < kj || (ki === kj && this.ids[i]! < this.ids[j]!);
  }

  /** Whether (key, id) comes before entry i. */
  lessThanAt(key: number, id: number, i: number): boolean {
    const k = this.keys[i]!;
    return key < k || (key === k && id < this.ids[i]!);
  }

  push(key: number, node: RadixNode, holder: Holder): void {
    if (this.size === this.keys.length) this.grow();
    const keys = this.keys;
    const ids = this.ids;
    const nodes = this.nodes;
    const holders = this.holders;
    const id = node.id;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const kp = keys[parent]!;
      if (!(key < kp || (key === kp && id < ids[parent]!))) break;
      keys[i] = kp;
      ids[i] = ids[parent]!;
      nodes[i] = nodes[parent]!;
      holders[i] = holders[parent]!;
      i = parent;
    }
    keys[i] = key;
    ids[i] = id;
    nodes[i] = node;
    holders[i] = holder;
  }

  /** Removes the top entry (read it first with keyAt(0) and nodeAt(0)). */
  pop(): void {
    const n = --this.size;
    const nodes = this.nodes;
    const holders = this.holders;
    if (n === 0) {
      nodes[0] = null;
      holders[0] = null;
      return;
    }
    const key = this.keys[n]!;
    const id = this.ids[n]!;
    const node = nodes[n]!;
    const holder = holders[n]!;
    nodes[n] = null;
    holders[n] = null;
    this.siftDown(0, key, id, node, holder);
  }

  clear(): void {
    this.nodes.fill(null, 0, this.size);
    this.holders.fill(null, 0, this.size);
    this.size = 0;
  }

  /**
   * Keeps only the entries `keep` accepts (in the order they are now), then restores the
   * heap order: a heap holds the same entries in some other arrangement after this, which
   * changes no order they come out in (entries of equal key and id are of the same node).
   */
  filter(keep: (holder: Holder, key: number) => boolean): void {
    const keys = this.keys;
    const ids = this.ids;
    const nodes = this.nodes;
    const holders = this.holders;
    let kept = 0;
    for (let i = 0; i < this.size; i++) {
      const holder = holders[i]!;
      if (!keep(holder, keys[i]!)) continue;
      keys[kept] = keys[i]!;
      ids[kept] = ids[i]!;
      nodes[kept] = nodes[i]!;
      holders[kept] = holder;
      kept++;
    }
    nodes.fill(null, kept, this.size);
    holders.fill(null, kept, this.size);
    this.size = kept;
    for (let i = (kept >> 1) - 1; i >= 0; i--) this.siftDown(i, keys[i]!, ids[i]!, nodes[i]!, holders[i]!);
  }

  /** Puts the entry at position i, or below it where the heap order wants it. */
  private siftDown(i: number, key: number, id: number, node: RadixNode, holder: Holder): void {
    const keys = this.keys;
    const ids = this.ids;
    const nodes = this.nodes;
    const holders = this.holders;
    const n = this.size;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && this.lessAt(right, left) ? right : left;
      const kc = keys[child]!;
      if (!(kc < key || (kc === key && ids[child]! < id))) break;
      keys[i] = kc;
      ids[i] = ids[child]!;
      nodes[i] = nodes[child]!;
      holders[i] = holders[child]!;
      i = child;
    }
    keys[i] = key;
    ids[i] = id;
    nodes[i] = node;
    holders[i] = holder;
  }

  private grow(): void {
    const keys = new Float64Array(2 * this.keys.length);
    keys.set(this.keys);
    this.keys = keys;
    const ids = new Float64Array(2 * this.ids.length);
    ids.set(this.ids);
    this.ids = ids;
  }
}
