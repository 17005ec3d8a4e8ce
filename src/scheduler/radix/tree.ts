// The global radix tree of the Preble-style global scheduler: which worker holds which
// prompt prefix in its KV cache, and the per-prefix history the cost model prices. Its
// parts are in this folder; how they work together: docs/scheduler-tree.md.
import type { TokenIds } from "../../common/tokens.js";
import { GLOBAL_SCHEDULER_DEFAULTS } from "../global-scheduler-settings.js";
import { BucketWindow } from "../windowed-sum.js";
import { EvictionPlan } from "./eviction-plan.js";
import { InFlight } from "./in-flight.js";
import { Holder, NO_PROTECTION, type RadixNode, type WindowClock } from "./node.js";
import type { PromptMatch } from "./prompt-match.js";
import { checkTokenIds, matchingTokens, TokenTrie } from "./trie.js";
import {
  MAX_SLOTS,
  type EvictedEntry,
  type EvictionOrder,
  type WorkerAccount,
  type InFlightHandle,
  type InsertResult,
  type PrefixMatch,
  type RadixTreeOptions,
  type SlotUpdate,
  type WorkerId,
} from "./types.js";
import { WorkerCacheBook } from "./worker-cache-book.js";
import { emptyArray } from "../scratch.js";

const NO_EVICTIONS: readonly EvictedEntry[] = Object.freeze([]);

function isPrefixMatch(x: TokenIds | PrefixMatch): x is PrefixMatch {
  return "path" in x;
}

/** Token arrays handed to a tree (prompts, slot reports) must never be written or transferred
 *  afterwards: it may keep views of Int32Array ones instead of copies (see TokenStore). */
export class RadixTree {
  private readonly workers = new Map<WorkerId, WorkerCacheBook>();
  private readonly trie: TokenTrie;
  private readonly root: RadixNode;
  private readonly clock: WindowClock;
  private readonly onEvict: ((workerId: WorkerId, evicted: readonly EvictedEntry[]) => void) | undefined;
  /** The one eviction plan `evictionOrder` lends (and `simulateEviction` reads out). */
  private readonly plan = new EvictionPlan();
  readonly windowMs: number;

  constructor(options: RadixTreeOptions) {
    const windowMs = options.windowMs ?? GLOBAL_SCHEDULER_DEFAULTS.windowMs;
    const buckets = options.windowBuckets ?? 12;
    if (!(windowMs > 0) || !Number.isFinite(windowMs)) throw new RangeError(`windowMs must be a positive number, got ${windowMs}`);
    if (!Number.isInteger(buckets) || buckets < 1) throw new RangeError(`windowBuckets must be a positive integer, got ${buckets}`);
    this.windowMs = windowMs;
    this.clock = { now: options.now, window: new BucketWindow(windowMs, buckets) };
    this.onEvict = options.onEvict;
    this.trie = new TokenTrie(this.clock, options.onRemove);
    this.root = this.trie.root;
  }

  /** Nodes in the tree (the root not counted). */
  get nodeCount(): number {
    return this.trie.nodes;
  }

  /** Distinct tokens stored in the tree (each segment once, whoever holds it). */
  get tokenCount(): number {
    return this.trie.tokens;
  }

  /** Workers the tree has state for (cached tokens, a capacity or requests in flight). */
  workerIds(): WorkerId[] {
    return [...this.workers.keys()];
  }

  capacity(workerId: WorkerId): number {
    return this.workers.get(workerId)?.capacity ?? Number.POSITIVE_INFINITY;
  }

  /** The worker's account (made if it has none), to read its cached tokens and capacity
   *  live: one that reads them for every decision keeps it, until it reads `dropped`. */
  account(workerId: WorkerId): WorkerAccount {
    return this.ensureWorker(workerId);
  }

  /** Tokens accounted to the worker: every node it caches, its segment counted once. */
  cachedTokens(workerId: WorkerId): number {
    return this.workers.get(workerId)?.used ?? 0;
  }

  /**
   * Bounds the tree's view of the worker's KV cache, in tokens (Infinity = unbounded).
   * Lowering it evicts LRU entries at once (reported here and to onEvict); entries with
   * requests in flight are kept, so the worker may stay above a lowered capacity until
   * they end; inserts then add nothing to it until it fits again.
   */
  setCapacity(workerId: WorkerId, tokens: number): readonly EvictedEntry[] {
    if (!(tokens >= 0) || (Number.isFinite(tokens) && !Number.isInteger(tokens))) {
      throw new RangeError(`capacity must be a non-negative integer or Infinity, got ${tokens}`);
    }
    const book = this.ensureWorker(workerId);
    book.capacity = tokens;
    if (book.used <= tokens) return NO_EVICTIONS;
    const evicted = book.evict(book.used - tokens, NO_PROTECTION, true);
    book.maybeCompact();
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return evicted;
  }

  /** Per worker, the longest cached prefix of `tokens`. Read-only: touches no stats. */
  match(tokens: TokenIds): PrefixMatch {
    return this.trie.match(tokens);
  }

  /** `match`, into a match kept by the caller and reused (what it held before is dropped):
   *  the global scheduler's match of each request, which allocates nothing. */
  matchInto(into: PromptMatch, tokens: TokenIds): PromptMatch {
    this.trie.matchInto(into, tokens);
    return into;
  }

  /** The longest prefix of `tokens` the worker caches. Read-only, allocates nothing. */
  heldLength(workerId: WorkerId, tokens: TokenIds): number {
    return this.trie.walkHeld(workerId, tokens, NO_PROTECTION);
  }

  /**
   * The worker now holds tokens[0..n). Touches the path (last access = now). When the new
   * tokens would exceed the worker's capacity, evicts its LRU leaves first (never the
   * prompt's own cached path, never a node with requests in flight on that worker); if
   * that is not enough, only the prefix that fits is recorded (`held` < n).
   */
  insert(workerId: WorkerId, tokens: TokenIds): InsertResult {
    const book = this.ensureWorker(workerId);
    const now = this.clock.now();
    const n = tokens.length;
    const mark = this.trie.newProtectMark();
    const held = this.trie.walkHeld(workerId, tokens, mark);
    if (!(tokens instanceof Int32Array)) checkTokenIds(tokens, held, n); // before anything is evicted
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (book.used + need > book.capacity) {
      evicted = book.evict(book.used + need - book.capacity, mark, true);
    }
    const room = book.capacity - book.used;
    const target = need <= room ? n : held + Math.max(0, room);
    if (target > 0) {
      const path = this.trie.ensurePath(tokens, target);
      let lh: Holder | undefined;
      for (let i = 0; i < path.length; i++) lh = book.cache(path[i]!, now);
      if (lh!.heldChildren === 0) book.pushLeaf(path[path.length - 1]!, lh!);
      emptyArray(path);
    }
    book.maybeCompact();
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return { held: target, added: target - held, evicted };
  }

  /**
   * What inserting `tokensNeeded` new tokens on the worker WOULD evict, in order, changing
   * nothing. Pass the prompt as `protect` to exclude its own cached path, as `insert` does
   * (then `insert(worker, prompt)` evicts exactly this list when
   * tokensNeeded = prompt.length - heldLength(worker, prompt)). `protect` may also be the
   * prompt's `match()` result, which skips walking its tokens again; it must come from the
   * tree as it is now (a node on its path split or pruned since throws).
   */
  simulateEviction(workerId: WorkerId, tokensNeeded: number, protect?: TokenIds | PrefixMatch): readonly EvictedEntry[] {
    const order = this.evictionOrder(workerId, tokensNeeded, protect);
    const out: EvictedEntry[] = [];
    for (let node = order.next(); node !== undefined; node = order.next()) {
      out.push({ workerId, node, tokens: node.segmentLength, contextLength: node.contextLength, lastAccess: node.lastAccess(workerId)! });
    }
    return out;
  }

  /**
   * `simulateEviction`'s entries one node at a time, allocating nothing (a placement policy
   * pricing every worker's eviction): the same nodes in the same order, each standing for
   * its whole segment. The order is lent, not given: it is valid until the tree changes or
   * the next call of `evictionOrder` or `simulateEviction`.
   */
  evictionOrder(workerId: WorkerId, tokensNeeded: number, protect?: TokenIds | PrefixMatch): EvictionOrder {
    const book = this.workers.get(workerId);
    // Nothing to evict while the worker has room: return before walking the prompt.
    if (book === undefined || book.used + tokensNeeded <= book.capacity) return this.plan.start(null, 0, NO_PROTECTION, 0);
    let mark = NO_PROTECTION;
    if (protect !== undefined) {
      mark = this.trie.newProtectMark();
      if (isPrefixMatch(protect)) this.trie.markMatchedPath(book, protect, mark);
      else this.trie.walkHeld(workerId, protect, mark);
    }
    return this.plan.start(book, book.used + tokensNeeded - book.capacity, mark, this.trie.newPlanMark());
  }

  /**
   * The worker no longer holds tokens[0..n) nor any longer prefix that extends it (it still
   * holds tokens[0..n-1)); n = 0 drops everything it caches. A worker's own report, so
   * in-flight requests do not protect here (their counts stay). Returns the tokens freed.
   */
  evict(workerId: WorkerId, tokens: TokenIds): number {
    const book = this.workers.get(workerId);
    if (book === undefined) return 0;
    const n = tokens.length;
    const victims: RadixNode[] = [];
    if (n === 0) {
      for (const child of this.root.children.values()) if (child.holder(workerId)?.cached) victims.push(child);
    } else {
      let node = this.root;
      let pos = 0;
      for (;;) {
        const child = node.children.get(tokens[pos]!);
        if (child === undefined) return 0;
        const i = matchingTokens(child, tokens, pos, n);
        if (i < Math.min(child.segLength, n - pos)) return 0;
        if (!child.isCachedOn(workerId)) return 0;
        if (pos + i === n) {
          // Length n is the i-th token of this segment: cut just before it.
          if (i > 1) this.trie.split(child, i - 1);
          victims.push(child);
          break;
        }
        pos += i;
        node = child;
      }
    }
    let freed = 0;
    for (const victim of victims) freed += book.uncacheSubtree(victim);
    book.maybeCompact();
    return freed;
  }

  /** Forgets the worker: its cached tokens, capacity and in-flight counts (its handles
   *  then release as no-ops). Returns the tokens it had cached. */
  dropWorker(workerId: WorkerId): number {
    const book = this.workers.get(workerId);
    if (book === undefined) return 0;
    this.workers.delete(workerId);
    book.dropped = true;
    // Holder records are prefix-closed: descend only where this worker has one.
    const order: RadixNode[] = [];
    const stack: RadixNode[] = [];
    for (const c of this.root.children.values()) if (c.holder(workerId) !== undefined) stack.push(c);
    while (stack.length > 0) {
      const x = stack.pop()!;
      order.push(x);
      for (const c of x.children.values()) if (c.holder(workerId) !== undefined) stack.push(c);
    }
    for (let j = order.length - 1; j >= 0; j--) {
      const x = order[j]!;
      x.removeHolder(x.holder(workerId)!);
      this.trie.prune(x);
    }
    return book.used;
  }

  /**
   * A request over `tokens` was placed on the worker: counts it in flight on every node of
   * its path (creating the uncached part of the path, so it is protected and priced too),
   * records it in each node's window stats (a hit where the worker caches the node) and
   * touches the worker's cached nodes on it. Give the handle back to `removeInFlight`.
   */
  addInFlight(workerId: WorkerId, tokens: TokenIds): InFlightHandle {
    const book = this.ensureWorker(workerId);
    const now = this.clock.now();
    if (tokens.length === 0) return new InFlight(this, workerId, 0, book, null, tokens);
    const path = this.trie.ensurePath(tokens, tokens.length);
    const deepest = this.countRequest(path, book, now);
    const last = path[path.length - 1]!;
    emptyArray(path);
    const deepestHolder = deepest?.holderOf(book);
    if (deepest !== null && deepestHolder !== undefined && deepestHolder.heldChildren === 0) {
      book.pushLeaf(deepest, deepestHolder);
      book.maybeCompact();
    }
    return new InFlight(this, workerId, tokens.length, book, last, tokens);
  }

  /**
   * A request over `path` was placed on the worker: every node counts it in flight and records
   * a hit where the worker caches it (cached nodes form a prefix of the path: caches are
   * prefix-closed), and the cached ones are touched. Returns the deepest cached node.
   */
  private countRequest(path: readonly RadixNode[], book: WorkerCacheBook, now: number): RadixNode | null {
    let deepest: RadixNode | null = null;
    for (let i = 0; i < path.length; i++) {
      const node = path[i]!;
      let h = node.holderOf(book);
      if (h === undefined) {
        h = new Holder(book);
        h.lastAccess = now;
        node.holders.push(h);
      }
      h.inFlight++;
      if (h.cached) {
        h.lastAccess = now;
        deepest = node;
      }
      node.record(now, h.cached);
    }
    return deepest;
  }

  /**
   * A request was placed on the worker, and the worker will hold its prompt once it runs:
   * `addInFlight(worker, tokens)` then `insert(worker, tokens)`, over one walk of the prompt,
   * leaving exactly the state those two calls leave (hits and misses are recorded before the
   * prompt is marked cached; the same LRU touches, capacity evictions, onEvict report and
   * node ids). Pass `match`, the prompt's `match()` result taken since the last change to
   * the tree, to skip the tokens it compared already (an outdated one is ignored).
   */
  placeOn(workerId: WorkerId, tokens: TokenIds, match?: PrefixMatch): InFlightHandle {
    const n = tokens.length;
    if (n === 0) {
      // Nothing to walk; insert may still evict (a worker above a lowered capacity).
      const handle = this.addInFlight(workerId, tokens);
      this.insert(workerId, tokens);
      return handle;
    }
    const book = this.ensureWorker(workerId);
    const now = this.clock.now();
    const path = this.trie.ensurePath(tokens, n, match);
    const last = path[path.length - 1]!;
    // addInFlight's part: every node counts the request, records a hit where the worker caches it.
    const held = this.countRequest(path, book, now)?.contextLength ?? 0;
    // addInFlight would push the deepest cached node as an LRU leaf here; insert below
    // either pushes that same entry again or gives the node a cached child, so it is left
    // out (heap entries only ever stand for a leaf at its last access time).
    // insert: every node of the path is now in flight on this worker, which already keeps
    // eviction off the prompt's own path.
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (book.used + need > book.capacity) evicted = book.evict(book.used + need - book.capacity, NO_PROTECTION, this.onEvict !== undefined);
    const room = book.capacity - book.used;
    const target = need <= room ? n : held + Math.max(0, room);
    if (target > 0) {
      let deepest: RadixNode | null = null;
      let dh: Holder | undefined;
      for (let i = 0; i < path.length; i++) {
        let node = path[i]!;
        if (node.contextLength > target) {
          if (node.startLength >= target) break;
          node = this.trie.split(node, target - node.startLength); // the head, cached below
        }
        dh = book.cache(node, now);
        deepest = node;
        if (node.contextLength === target) break;
      }
      if (dh!.heldChildren === 0) book.pushLeaf(deepest!, dh!);
    }
    emptyArray(path);
    book.maybeCompact();
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return new InFlight(this, workerId, n, book, last, tokens);
  }

  /**
   * Slot `slot` of the worker now holds exactly `tokens` (the worker's own report; what the
   * slot held before is gone from it). The tree keeps, per node and worker, how many of the
   * worker's slots hold the node, and per slot only its deepest node (the slot mirror). The
   * new content is recorded as `insert` records it (touched, capacity permitting: what does
   * not fit is not recorded); of the old content, the nodes that no other slot of the worker
   * holds and no request of the worker has in flight (a placement not yet reported) are
   * dropped, with whatever the worker caches below them. Nothing else is touched: other
   * slots keep their last access times. A capacity eviction (here or by any other call)
   * may still drop a node some slot holds; that slot then ends above it.
   *
   * `placed`, the in-flight handle of the placement of this very array on this worker (a
   * report of what was placed: token arrays are read-only), spares the walk over the
   * tokens: the report starts from the placement's path (ignored when it is not that).
   */
  setSlot(workerId: WorkerId, slot: number, tokens: TokenIds, placed?: InFlightHandle): SlotUpdate {
    checkSlot(slot);
    const book = this.ensureWorker(workerId);
    const previous = book.slots[slot] ?? null;
    while (book.slots.length <= slot) book.slots.push(null);
    // The old content and the new both count the slot as idle, or neither.
    const idle = book.isIdle(slot);
    const n = tokens.length;
    if (n === 0) {
      book.slots[slot] = null;
      const released = book.releaseSlot(previous, idle);
      book.maybeCompact();
      return { held: 0, added: 0, evicted: NO_EVICTIONS, released };
    }
    const now = this.clock.now();
    const path = this.placedPath(book, tokens, placed) ?? this.trie.ensurePath(tokens, n);
    // Reference the part already cached first, so what the old and new content share is
    // never dropped in between.
    const mark = this.trie.newProtectMark();
    let held = 0;
    let cachedNodes = 0;
    for (; cachedNodes < path.length; cachedNodes++) {
      const node = path[cachedNodes]!;
      const h = node.holderOf(book);
      if (h === undefined || !h.cached) break;
      h.slotRefs++;
      if (idle) h.idleSlotRefs++;
      node.protectMark = mark;
      held = node.contextLength;
    }
    book.slots[slot] = null;
    const released = book.releaseSlot(previous, idle);
    // Then as insert: make room for the rest (never evicting the content's own cached part)
    // and record what fits.
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (book.used + need > book.capacity) evicted = book.evict(book.used + need - book.capacity, mark, true);
    const room = book.capacity - book.used;
    const target = need <= room ? n : held + Math.max(0, room);
    let deepest: RadixNode | null = null;
    let dh: Holder | undefined;
    for (let i = 0; i < path.length; i++) {
      let node = path[i]!;
      if (node.contextLength > target) {
        if (node.startLength >= target) break;
        node = this.trie.split(node, target - node.startLength);
      }
      dh = book.cache(node, now);
      if (i >= cachedNodes) {
        // The first ones have theirs.
        dh.slotRefs++;
        if (idle) dh.idleSlotRefs++;
      }
      deepest = node;
      if (node.contextLength === target) break;
    }
    if (deepest !== null && dh!.heldChildren === 0) book.pushLeaf(deepest, dh!);
    // What did not fit and nobody else has: insert would not have created it.
    if (target < n) this.trie.prune(path[path.length - 1]!);
    emptyArray(path);
    book.slots[slot] = deepest;
    if (deepest !== null) dh!.slot = slot;
    book.maybeCompact();
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return { held: target, added: target - held, evicted, released };
  }

  /** The path of a live placement of `tokens` on the worker (its in-flight path: whole
   *  nodes from the root to tokens.length, kept by its in-flight counts; a split keeps the
   *  deeper part's identity), in the scratch path array; undefined when `placed` is not one. */
  private placedPath(book: WorkerCacheBook, tokens: TokenIds, placed: InFlightHandle | undefined): RadixNode[] | undefined {
    if (!(placed instanceof InFlight) || placed.owner !== this || placed.released || placed.book !== book || placed.tokens !== tokens) return undefined;
    const node = placed.node;
    if (node === null || !node.attached || node.contextLength !== tokens.length) return undefined;
    return this.trie.pathTo(node);
  }

  /**
   * A request runs in the worker's slot (`running`), or has left it. A slot that runs none is
   * idle: what it holds is what a request admitted now could reuse (`PromptMatch.reusableOn`).
   */
  setSlotRunning(workerId: WorkerId, slot: number, running: boolean): void {
    checkSlot(slot);
    this.ensureWorker(workerId).countRunning(slot, running ? 1 : -1);
  }

  /** Tokens slot `slot` of the worker holds as far as the tree knows (0 when empty or
   *  unknown; less than reported when a capacity eviction took its end). */
  slotLength(workerId: WorkerId, slot: number): number {
    return this.workers.get(workerId)?.slots[slot]?.contextLength ?? 0;
  }

  /** A copy of what slot `slot` of the worker holds (as `slotLength`). */
  slotContent(workerId: WorkerId, slot: number): number[] {
    return this.workers.get(workerId)?.slots[slot]?.prefix() ?? [];
  }

  /** The request ended. False when the handle was already released, or its worker was
   *  dropped since (or it is not from this tree). */
  removeInFlight(handle: InFlightHandle): boolean {
    if (!(handle instanceof InFlight) || handle.owner !== this || handle.released) return false;
    handle.released = true;
    if (this.workers.get(handle.workerId) !== handle.book) return false;
    let node = handle.node;
    while (node !== null && node !== this.root) {
      const parent = node.parent;
      const h = node.holderOf(handle.book)!;
      h.inFlight--;
      if (h.inFlight === 0 && !h.cached) node.removeHolder(h);
      this.trie.prune(node);
      node = parent;
    }
    return true;
  }

  private ensureWorker(workerId: WorkerId): WorkerCacheBook {
    let book = this.workers.get(workerId);
    if (book === undefined) {
      book = new WorkerCacheBook(workerId, this.trie);
      this.workers.set(workerId, book);
    }
    return book;
  }
}

/** A slot number a worker can report: an integer in [0, MAX_SLOTS). */
function checkSlot(slot: number): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= MAX_SLOTS) throw new RangeError(`slot must be an integer in [0, ${MAX_SLOTS}), got ${slot}`);
}
