// The radix tree's structure: a compressed trie over token ids, with the walks that read it
// (match, held prefix), the ones that build paths in it (creating and splitting nodes), and
// pruning. How the tree works: docs/scheduler-tree.md.
import { sharedTokenCount, type TokenIds } from "../../common/tokens.js";
import { Holder, NO_PROTECTION, NO_SEGMENT, RadixNode, type WindowClock } from "./node.js";
import { PromptMatch } from "./prompt-match.js";
import { TokenStore } from "./token-store.js";
import type { PrefixMatch, WorkerId } from "./types.js";
import type { WorkerCacheBook } from "./worker-cache-book.js";
import { emptyArray } from "../scratch.js";

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
  /** Bumped by every change to the structure (a node made, split or pruned): a match
   *  taken at the current version still describes the tree exactly. */
  version = 0;
  private readonly store = new TokenStore();
  private readonly pathBuf: RadixNode[] = [];
  private nextId = 1;
  private protectEpoch = 0;
  private planEpoch = 0;

  constructor(
    private readonly clock: WindowClock,
    private readonly onRemove: ((nodeId: number) => void) | undefined,
  ) {
    this.root = new RadixNode(0, null, NO_SEGMENT, 0, 0, 0, clock);
  }

  /** Distinct tokens stored (each segment once, whoever holds it). */
  get tokens(): number {
    return this.store.live;
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
  match(tokens: TokenIds): PromptMatch {
    const m = new PromptMatch();
    this.matchInto(m, tokens);
    return m;
  }

  /** `match`, into `m` (what it held before is dropped). */
  matchInto(m: PromptMatch, tokens: TokenIds): void {
    m.reset(tokens, this.version);
    const n = tokens.length;
    const path = m.nodes;
    let node = this.root;
    let pos = 0;
    while (pos < n) {
      const child = node.children.get(tokens[pos]!);
      if (child === undefined) break;
      const i = matchingTokens(child, tokens, pos, n);
      pos += i;
      path.push(child);
      const hs = child.holders;
      for (let k = 0; k < hs.length; k++) {
        const h = hs[k]!;
        if (!h.cached) continue;
        m.held(h.book, pos);
        if (h.idleSlotRefs > 0) m.reusable(h.book, pos);
      }
      if (i < child.segLength) break;
      node = child;
    }
    m.matchedTokens = pos;
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
      const i = matchingTokens(child, tokens, pos, n);
      pos += i;
      if (i < child.segLength) break;
      node = child;
    }
    return pos;
  }

  /** Marks the worker's cached nodes on a match path, as walkHeld would. */
  markMatchedPath(book: WorkerCacheBook, m: PrefixMatch, mark: number): void {
    const workerId = book.id;
    if (m instanceof PromptMatch && m.version === this.version) {
      // Nothing changed since the match: its path is the tree's, and what the worker caches
      // of it (a prefix of it) is what the match found: the nodes that start before that ends.
      const held = m.heldOn(book);
      for (const node of m.nodes) {
        if (node.startLength >= held) return;
        node.protectMark = mark;
      }
      return;
    }
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
   *  from the root); taken at the trie's current version, it also splits the node it
   *  matched in part where the match stopped, without comparing a token again. */
  ensurePath(tokens: TokenIds, end: number, from?: PrefixMatch): RadixNode[] {
    const path = this.pathBuf;
    emptyArray(path);
    let node = this.root;
    let pos = 0;
    if (from instanceof PromptMatch && from.tokens === tokens && from.version === this.version) {
      // Nothing changed since the match: its nodes spell what it compared.
      const full = Math.min(end, from.matchedTokens);
      for (let k = 0; k < from.nodes.length && pos < full; k++) {
        let view = from.nodes[k]!;
        if (view.contextLength > full) view = this.split(view, full - view.startLength);
        path.push(view);
        node = view;
        pos = view.contextLength;
      }
    } else if (from !== undefined && from.tokens === tokens) {
      const full = Math.min(end, from.matchedTokens);
      for (const view of from.path) {
        if (!(view instanceof RadixNode) || view.contextLength > full) break;
        // Still attached under the node before it: a split or a prune since changes that
        // (the root is never split, so a chain that holds spells what match compared).
        if (!view.attached || view.parent !== node) {
          emptyArray(path);
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
      let child = node.children.get(tokens[pos]!);
      if (child === undefined) {
        path.push(this.addLeaf(node, tokens, pos, end));
        break;
      }
      const i = matchingTokens(child, tokens, pos, end);
      if (i < child.segLength) child = this.split(child, i);
      path.push(child);
      pos += i;
      node = child;
    }
    return path;
  }

  /** A new child of `parent` holding tokens[from..end) (which must be 32-bit integers:
   *  throws before changing anything otherwise). */
  private addLeaf(parent: RadixNode, tokens: TokenIds, from: number, end: number): RadixNode {
    const child = new RadixNode(this.nextId, parent, NO_SEGMENT, 0, 0, end, this.clock);
    if (!this.store.append(child, tokens, from, end - from)) checkTokenIds(tokens, from, end); // throws
    this.nextId++;
    parent.addChild(tokens[from]!, child);
    this.nodes++;
    this.version++;
    return child;
  }

  /** Splits `node` after its first k tokens; `node` keeps the tail (and its identity), the
   *  returned new node is the head. Holder records are copied to the head. Both keep their
   *  part of the segment where it is, except a borrowed part left shorter than half of its
   *  prompt's buffer, which is copied into the store (TokenStore.settle). */
  split(node: RadixNode, k: number): RadixNode {
    const parent = node.parent!;
    const head = new RadixNode(this.nextId++, parent, node.buf, node.segStart, k, node.startLength + k, this.clock);
    node.segStart += k;
    node.segLength -= k;
    parent.addChild(head.firstToken, head);
    head.addChild(node.firstToken, node);
    node.parent = head;
    for (const h of node.holders) {
      const c = new Holder(h.book);
      c.cached = h.cached;
      c.lastAccess = h.lastAccess;
      c.inFlight = h.inFlight;
      c.heldChildren = h.cached ? 1 : 0;
      c.slotRefs = h.slotRefs;
      c.idleSlotRefs = h.idleSlotRefs;
      head.holders.push(c);
      if (h.cached) h.book.nodes++;
    }
    if (node.ring !== null) head.ring = node.ring.slice();
    head.soloBucket = node.soloBucket;
    head.soloRequests = node.soloRequests;
    head.soloHits = node.soloHits;
    head.protectMark = node.protectMark;
    this.nodes++;
    this.version++;
    this.store.splitOff(head, node);
    this.store.settle(head);
    this.store.settle(node);
    return head;
  }

  /**
   * Removes a node nobody caches or has in flight (its children are gone by then). With
   * `keepTokens` (a node an eviction reports), it takes a copy of its segment along; else
   * its tokens are gone with it (the store reuses their place; the node must not hold on to
   * the store's array, which a grown store has replaced).
   */
  prune(node: RadixNode, keepTokens = false): void {
    if (!node.attached || node.holders.length > 0 || node.children.size > 0) return;
    node.parent!.removeChild(node.firstToken);
    node.attached = false;
    this.nodes--;
    this.store.release(node);
    node.buf = keepTokens ? node.buf.slice(node.segStart, node.segStart + node.segLength) : NO_SEGMENT;
    node.segStart = 0;
    this.version++;
    this.onRemove?.(node.id);
  }

  /** The path of whole nodes from the root to `node`, root side first, in the shared scratch
   *  array (as `ensurePath` returns it). */
  pathTo(node: RadixNode): RadixNode[] {
    const path = this.pathBuf;
    emptyArray(path);
    for (; node !== this.root; node = node.parent!) path.push(node);
    path.reverse();
    return path;
  }
}

/** How many tokens of `node`'s segment tokens[pos..end) starts with. The first one is known to
 *  match (it is the node's key among its parent's children), and so the result is >= 1. */
export function matchingTokens(node: RadixNode, tokens: TokenIds, pos: number, end: number): number {
  const limit = Math.min(node.segLength, end - pos);
  return 1 + sharedTokenCount(node.buf, node.segStart + 1, tokens, pos + 1, limit - 1);
}
