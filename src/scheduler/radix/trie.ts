// The radix tree's structure: a compressed trie over token ids, with the walks that read it
// (match, held prefix), the ones that build paths in it (creating and splitting nodes), and
// pruning. How the tree works: docs/scheduler-tree.md.
import type { TokenIds } from "../../common/tokens.js";
import { Holder, NO_PROTECTION, RadixNode, type WindowClock } from "./node.js";
import type { PrefixMatch, WorkerId } from "./types.js";
import type { WorkerCacheBook } from "./worker-cache-book.js";

/** Throws unless tokens[from..to) are 32-bit integers (what the Int32Array segments hold). */
export function checkTokenIds(tokens: TokenIds, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const t = tokens[i]!;
    if (t !== (t | 0)) throw new RangeError(`token ids must be 32-bit integers; tokens[${i}] = ${t}`);
  }
}

export class TokenTrie {
  readonly root: RadixNode;
  /** Nodes in the trie (the root not counted). */
  nodes = 0;
  /** Distinct tokens stored (each segment once, whoever holds it). */
  tokens = 0;
  private readonly pathBuf: RadixNode[] = [];
  private nextId = 1;
  private protectEpoch = 0;
  private planEpoch = 0;

  constructor(
    private readonly clock: WindowClock,
    /** The books of the workers (a split gives each worker caching the node one more node). */
    private readonly books: ReadonlyMap<WorkerId, WorkerCacheBook>,
    private readonly onRemove: ((nodeId: number) => void) | undefined,
  ) {
    this.root = new RadixNode(0, null, new Int32Array(0), 0, clock);
  }

  /** A fresh `protectMark` (no node carries it yet). */
  newProtectMark(): number {
    return ++this.protectEpoch;
  }

  /** A fresh `planMark` (no holder record carries it yet). */
  newPlanMark(): number {
    return ++this.planEpoch;
  }

  /** Per worker, the longest cached prefix of `tokens`. Read-only: touches no stats. */
  match(tokens: TokenIds): PrefixMatch {
    const n = tokens.length;
    const perWorker = new Map<WorkerId, number>();
    const path: RadixNode[] = [];
    let node = this.root;
    let pos = 0;
    let longest = 0;
    while (pos < n) {
      const child = node.children.get(tokens[pos]!);
      if (child === undefined) break;
      const seg = child.seg;
      const limit = Math.min(seg.length, n - pos);
      let i = 1;
      while (i < limit && seg[i] === tokens[pos + i]) i++;
      pos += i;
      path.push(child);
      const hs = child.holders;
      for (let k = 0; k < hs.length; k++) {
        const h = hs[k]!;
        if (h.cached) {
          perWorker.set(h.workerId, pos);
          longest = pos;
        }
      }
      if (i < seg.length) break;
      node = child;
    }
    return { matchedTokens: pos, longest, perWorker, path, tokens };
  }

  /** Longest prefix of `tokens` the worker caches; marks the nodes walked (including one
   *  matched in part) with `mark` unless it is NO_PROTECTION. */
  walkHeld(workerId: WorkerId, tokens: TokenIds, mark: number): number {
    const n = tokens.length;
    let node = this.root;
    let pos = 0;
    while (pos < n) {
      const child = node.children.get(tokens[pos]!);
      if (child === undefined || !child.isCachedOn(workerId)) break;
      if (mark !== NO_PROTECTION) child.protectMark = mark;
      const seg = child.seg;
      const limit = Math.min(seg.length, n - pos);
      let i = 1;
      while (i < limit && seg[i] === tokens[pos + i]) i++;
      pos += i;
      if (i < seg.length) break;
      node = child;
    }
    return pos;
  }

  /** Marks the worker's cached nodes on a match path, as walkHeld would. */
  markMatchedPath(workerId: WorkerId, m: PrefixMatch, mark: number): void {
    let prev: RadixNode = this.root;
    for (const view of m.path) {
      if (!(view instanceof RadixNode) || !view.attached || view.parent !== prev) {
        throw new Error("simulateEviction: the match result is stale (the tree changed since match())");
      }
      if (!view.isCachedOn(workerId)) return;
      view.protectMark = mark;
      prev = view;
    }
  }

  /** Makes tokens[0..end) a path of whole nodes (creating and splitting), returned in the
   *  shared scratch array, root side first. With `from`, a match of this same array, the
   *  walk starts after the nodes that match compared in full, when they are still the
   *  tree's (a match of another array, or one gone stale, is ignored: the walk then starts
   *  from the root). */
  ensurePath(tokens: TokenIds, end: number, from?: PrefixMatch): RadixNode[] {
    const path = this.pathBuf;
    path.length = 0;
    let node = this.root;
    let pos = 0;
    if (from !== undefined && from.tokens === tokens) {
      const full = Math.min(end, from.matchedTokens);
      for (const view of from.path) {
        if (!(view instanceof RadixNode) || view.contextLength > full) break;
        // Still attached under the node before it: a split or a prune since changes that
        // (the root is never split, so a chain that holds spells what match compared).
        if (!view.attached || view.parent !== node) {
          path.length = 0;
          node = this.root;
          pos = 0;
          break;
        }
        path.push(view);
        node = view;
        pos = view.contextLength;
      }
    }
    while (pos < end) {
      const first = tokens[pos]!;
      let child = node.children.get(first);
      if (child === undefined) {
        const seg = new Int32Array(end - pos);
        for (let j = 0; j < seg.length; j++) {
          const t = tokens[pos + j]!;
          seg[j] = t;
          if (seg[j] !== t) checkTokenIds(tokens, pos + j, pos + j + 1); // not a 32-bit integer: throws
        }
        child = new RadixNode(this.nextId++, node, seg, end, this.clock);
        node.children.set(first, child);
        this.nodes++;
        this.tokens += seg.length;
        path.push(child);
        break;
      }
      const seg = child.seg;
      const limit = Math.min(seg.length, end - pos);
      let i = 1;
      while (i < limit && seg[i] === tokens[pos + i]) i++;
      if (i < seg.length) child = this.split(child, i);
      path.push(child);
      pos += i;
      node = child;
    }
    return path;
  }

  /** Splits `node` after its first k tokens; `node` keeps the tail (and its identity), the
   *  returned new node is the head. Holder records are copied to the head. */
  split(node: RadixNode, k: number): RadixNode {
    const parent = node.parent!;
    const old = node.seg;
    const head = new RadixNode(this.nextId++, parent, old.slice(0, k), node.contextLength - old.length + k, this.clock);
    node.seg = old.slice(k);
    parent.children.set(old[0]!, head);
    head.children.set(node.seg[0]!, node);
    node.parent = head;
    for (const h of node.holders) {
      const c = new Holder(h.workerId);
      c.cached = h.cached;
      c.lastAccess = h.lastAccess;
      c.inFlight = h.inFlight;
      c.heldChildren = h.cached ? 1 : 0;
      c.slotRefs = h.slotRefs;
      head.holders.push(c);
      if (h.cached) this.books.get(h.workerId)!.nodes++;
    }
    if (node.ring !== null) head.ring = node.ring.slice();
    head.protectMark = node.protectMark;
    this.nodes++;
    return head;
  }

  /** Removes a node nobody caches or has in flight (its children are gone by then). */
  prune(node: RadixNode): void {
    if (!node.attached || node.holders.length > 0 || node.children.size > 0) return;
    node.parent!.children.delete(node.seg[0]!);
    node.attached = false;
    this.nodes--;
    this.tokens -= node.seg.length;
    this.onRemove?.(node.id);
  }

  /** The path of whole nodes from the root to `node`, root side first, in the shared scratch
   *  array (as `ensurePath` returns it). */
  pathTo(node: RadixNode): RadixNode[] {
    const path = this.pathBuf;
    path.length = 0;
    for (; node !== this.root; node = node.parent!) path.push(node);
    path.reverse();
    return path;
  }
}
