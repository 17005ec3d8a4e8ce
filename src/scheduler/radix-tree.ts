// The global radix tree of the Preble-style global scheduler (docs/placement.md): which
// worker holds which prompt prefix in its KV cache, and the per-prefix history the cost
// model prices.
//
// Structure
// - A compressed trie over token ids. Each node owns one segment of tokens (an Int32Array,
//   never a string) and stands for the prefix root..node; `contextLength` is the length of
//   that prefix. Children are found by their first token (Map<number, node>). A node is
//   split when an insert, an in-flight path or an eviction ends or diverges inside it; the
//   tail (deeper part) keeps the node's identity (its heap entries, in-flight handles and
//   views stay valid), a new node becomes the head. Nodes are not merged back; pruning
//   alone bounds the size. Token ids must be 32-bit integers (checked where they enter).
// - The scheduler's own bookkeeping (`placeOn`: the request is in flight and its prompt is
//   recorded as an estimate) and the workers' precise cache events (`setSlot`: slot s now
//   holds tokens[0..n); `evict`: the worker lost a prefix) feed the same records; `insert`
//   and `addInFlight` are the two halves of `placeOn`, also usable alone.
// - Per node and per worker, one holder record: cached (the worker holds the whole
//   segment), last access time, in-flight request count, how many children that worker
//   holds (0 = the node is one of the worker's leaves) and how many of its slots hold the
//   node. Invariants: a worker that holds a node holds all its ancestors (KV caches are
//   prefix-closed); in-flight paths and slot contents run from the root, so those counts
//   are prefix-closed too; a node a slot holds is cached. Every node has at least one
//   holder record: a node no worker caches and no request has in flight is pruned at once,
//   so the tree's size is bounded by the cached plus in-flight tokens. `onRemove` reports
//   the id of each pruned node, so what others keep per node can go with it.
// - Slots (`setSlot`): per worker and slot, only the deepest node of what the slot holds
//   (the slot mirror: one reference per slot, never a copy of the tokens). A report adds a
//   slot reference along the new content and removes one along the old; a node no slot
//   holds any more is dropped unless a request of that worker is in flight over it (a
//   placement not reported yet: its estimate stays), and what the worker caches below such
//   a node goes with it (estimates of requests that never reported). Nothing else is
//   touched, so other slots keep their LRU times. Capacity still rules: an eviction may
//   take a node some slot holds (the tree's view is bounded by the worker's capacity, its
//   slots may together hold more); such a slot then ends at the evicted node's parent.
// - Per worker: a KV capacity in tokens (`setCapacity`, default unbounded), the tokens
//   accounted to it (each node's segment once per worker caching it), and a lazy min-heap
//   of its leaves keyed by (last access, node id) for LRU eviction. Eviction takes the
//   least recently used leaf first (leaf-most: a parent becomes a candidate only once its
//   children are gone, and touching a path touches every node on it, so a parent is never
//   older than its children), skips nodes with requests in flight on that worker, and
//   stops as soon as the worker fits. Eviction is by whole node. An insert that cannot fit
//   even then records only the prefix that fits, so capacity is never exceeded by inserts.
// - Per node: requests that touched it (`addInFlight`) and how many of them found it cached
//   on the worker they were sent to, in bucketed counters over a sliding window (a ring of
//   `windowBuckets` buckets of windowMs / windowBuckets; the window is exact to one bucket).
//
// The Preble parameters this serves (the cost model itself lives elsewhere)
// - E2 exploit/explore: `match(tokens).longest` is `matched`, `tokens.length - longest`
//   is `remaining`; `perWorker` says which workers hold the best prefix.
// - L (load): per node `requestsInWindow()`, `hitsInWindow()` (miss rate = 1 - hits /
//   requests) over the window H (default 180 000 ms, Preble's 3 minutes),
//   `cachedWorkerCount` (workers sharing it), `segmentLength`/`contextLength` (prefill
//   time of the node's tokens), `inFlight(worker)` (active requests).
// - M (eviction): `simulateEviction(worker, tokensNeeded, prompt or its match)` lists what
//   LRU would evict on that worker, without changing anything, in O(k log n) for k
//   entries; each entry carries its node so the cost model can price its recompute
//   (miss rate x count x prefill).
// - P (new prefill): `heldLength(worker, tokens)` is the cached part on that worker.
//
// Several models: token ids mean nothing across tokenizers, so keep ONE RadixTree PER
// MODEL (e.g. Map<modelId, RadixTree>); worker ids are then the workers serving that model.
//
// Speed: `match` allocates per call and per node visited at most (the path array, one
// Map), `heldLength` nothing; never per token; tokens are compared against the typed
// segments. A placement walks the prompt once: `placeOn` resumes from the request's
// `match` path, and a slot report of the array that was placed starts from the
// placement's in-flight path (no token compared); a report only visits the nodes of the
// slot's old and new content. Measured (bench/scheduler/radix-tree.bench.ts, 1.4M-token
// tree, 2100-token prompts, 4 workers, one core): match ~4 us, a placement step (match +
// 4 x simulateEviction + in-flight add/remove) ~7 us, insert ~8 us; the whole scheduler
// in bench/scheduler/scheduler.bench.ts.
// Pure code: no I/O, the clock is injected.
import type { TokenIds } from "../common/tokens.js";

export type WorkerId = string;

export interface RadixTreeOptions {
  /** Injected clock, in milliseconds. */
  now: () => number;
  /** Sliding window of the per-node request statistics (Preble's H). Default 180 000. */
  windowMs?: number;
  /** Buckets in that window. Default 12 (15 s each with the default window). */
  windowBuckets?: number;
  /** Called with every capacity eviction (by `insert` or `setCapacity`), after it happened. */
  onEvict?: (workerId: WorkerId, evicted: readonly EvictedEntry[]) => void;
  /** Called with the id of every node that leaves the tree (pruned: no worker caches it, no
   *  request has it in flight), at once, in the middle of the call that removed it: drop
   *  what is kept under that id (ids are never reused), do not touch the tree. */
  onRemove?: (nodeId: number) => void;
}

/** What a caller may read of a node (a match path, an eviction entry). Do not keep it long:
 *  a node may be split (it then keeps its lower part) or pruned (`attached` turns false). */
export interface RadixNodeView {
  /** Unique within the tree, never reused. */
  readonly id: number;
  /** Tokens from the root to the end of this node. */
  readonly contextLength: number;
  /** Tokens in this node's own segment. */
  readonly segmentLength: number;
  /** contextLength - segmentLength: where the segment starts in the prompt. */
  readonly startLength: number;
  /** False once the node has been pruned from the tree. */
  readonly attached: boolean;
  isCachedOn(workerId: WorkerId): boolean;
  /** Last time the worker inserted or had a request placed over this node; undefined when
   *  it has no record here. */
  lastAccess(workerId: WorkerId): number | undefined;
  /** Requests of this worker in flight over this node. */
  inFlight(workerId: WorkerId): number;
  readonly inFlightTotal: number;
  /** Workers that hold this node in their KV cache. */
  cachedWorkers(): WorkerId[];
  readonly cachedWorkerCount: number;
  /** Requests that touched this node within the window. */
  requestsInWindow(): number;
  /** Of those, the ones whose worker held this node when they were placed. */
  hitsInWindow(): number;
  /** A copy of this node's segment. */
  segmentTokens(): number[];
  /** A copy of the whole prefix root..this node. */
  prefix(): number[];
}

export interface EvictedEntry {
  readonly workerId: WorkerId;
  readonly node: RadixNodeView;
  /** Tokens the worker loses: the node's whole segment. */
  readonly tokens: number;
  /** The prefix length at the end of the evicted segment (total context for prefill). */
  readonly contextLength: number;
  readonly lastAccess: number;
}

export interface PrefixMatch {
  /** Tokens of the prompt found in the tree, cached by some worker or only in flight. */
  readonly matchedTokens: number;
  /** The longest prefix cached on any worker (Preble's `matched`). */
  readonly longest: number;
  /** Per worker, the longest cached prefix; workers with none are absent (read `?? 0`). */
  readonly perWorker: ReadonlyMap<WorkerId, number>;
  /** The nodes walked, root side first; the last one may be matched only in part
   *  (its contextLength > matchedTokens). */
  readonly path: readonly RadixNodeView[];
  /** The prompt matched (the caller's array, not a copy). */
  readonly tokens: TokenIds;
}

export interface InsertResult {
  /** The prefix the worker now holds: tokens.length, or less when even eviction could not
   *  make room within its capacity (nodes in flight cannot be evicted). */
  readonly held: number;
  /** Tokens newly accounted to the worker. */
  readonly added: number;
  /** What was evicted from this worker to make room, in eviction order. */
  readonly evicted: readonly EvictedEntry[];
}

/** What a `setSlot` report changed. */
export interface SlotUpdate extends InsertResult {
  /** Tokens the worker no longer holds because the slot's old content is gone. */
  readonly released: number;
}

/** Slot indexes accepted by `setSlot`: [0, MAX_SLOTS). */
export const MAX_SLOTS = 1 << 16;

/** Returned by `addInFlight`, given back to `removeInFlight` when the request ends. */
export interface InFlightHandle {
  readonly workerId: WorkerId;
  /** Prompt tokens the request covers. */
  readonly length: number;
  readonly released: boolean;
}

const NO_EVICTIONS: readonly EvictedEntry[] = Object.freeze([]);

/** Throws unless tokens[from..to) are 32-bit integers (what the Int32Array segments hold). */
function checkTokenIds(tokens: TokenIds, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    const t = tokens[i]!;
    if (t !== (t | 0)) throw new RangeError(`token ids must be 32-bit integers; tokens[${i}] = ${t}`);
  }
}

function isPrefixMatch(x: TokenIds | PrefixMatch): x is PrefixMatch {
  return !Array.isArray(x);
}
const NO_PROTECTION = -1;

interface WindowClock {
  readonly now: () => number;
  readonly bucketMs: number;
  readonly buckets: number;
}

class Holder {
  cached = false;
  lastAccess = 0;
  inFlight = 0;
  /** Children this worker caches (meaningful while cached; 0 = a leaf of this worker). */
  heldChildren = 0;
  /** Slots of this worker whose reported content covers this node (> 0 only while cached). */
  slotRefs = 0;
  /** Scratch mark of an eviction plan (dedupes heap entries). */
  planMark = 0;

  constructor(readonly workerId: WorkerId) {}
}

class RadixNode implements RadixNodeView {
  readonly children = new Map<number, RadixNode>();
  readonly holders: Holder[] = [];
  /** [bucket index x B | requests x B | hits x B], allocated on the first request. */
  ring: Float64Array | null = null;
  protectMark = 0;
  attached = true;

  constructor(
    readonly id: number,
    public parent: RadixNode | null,
    public seg: Int32Array,
    readonly contextLength: number,
    private readonly clock: WindowClock,
  ) {}

  get segmentLength(): number {
    return this.seg.length;
  }

  get startLength(): number {
    return this.contextLength - this.seg.length;
  }

  holder(workerId: WorkerId): Holder | undefined {
    const hs = this.holders;
    for (let i = 0; i < hs.length; i++) {
      const h = hs[i]!;
      if (h.workerId === workerId) return h;
    }
    return undefined;
  }

  removeHolder(h: Holder): void {
    const hs = this.holders;
    const i = hs.indexOf(h);
    if (i < 0) return;
    const last = hs.pop()!;
    if (i < hs.length) hs[i] = last;
  }

  isCachedOn(workerId: WorkerId): boolean {
    return this.holder(workerId)?.cached ?? false;
  }

  lastAccess(workerId: WorkerId): number | undefined {
    return this.holder(workerId)?.lastAccess;
  }

  inFlight(workerId: WorkerId): number {
    return this.holder(workerId)?.inFlight ?? 0;
  }

  get inFlightTotal(): number {
    let sum = 0;
    for (const h of this.holders) sum += h.inFlight;
    return sum;
  }

  cachedWorkers(): WorkerId[] {
    const out: WorkerId[] = [];
    for (const h of this.holders) if (h.cached) out.push(h.workerId);
    return out;
  }

  get cachedWorkerCount(): number {
    let count = 0;
    for (const h of this.holders) if (h.cached) count++;
    return count;
  }

  record(t: number, hit: boolean): void {
    const { bucketMs, buckets } = this.clock;
    let ring = this.ring;
    if (ring === null) {
      ring = new Float64Array(3 * buckets);
      ring.fill(Number.NaN, 0, buckets);
      this.ring = ring;
    }
    const b = Math.floor(t / bucketMs);
    const s = ((b % buckets) + buckets) % buckets;
    if (ring[s] !== b) {
      ring[s] = b;
      ring[buckets + s] = 0;
      ring[2 * buckets + s] = 0;
    }
    ring[buckets + s] = ring[buckets + s]! + 1;
    if (hit) ring[2 * buckets + s] = ring[2 * buckets + s]! + 1;
  }

  private windowSum(offset: number): number {
    const ring = this.ring;
    if (ring === null) return 0;
    const { bucketMs, buckets } = this.clock;
    const current = Math.floor(this.clock.now() / bucketMs);
    let sum = 0;
    for (let s = 0; s < buckets; s++) {
      const b = ring[s]!;
      if (b > current - buckets && b <= current) sum += ring[offset + s]!;
    }
    return sum;
  }

  requestsInWindow(): number {
    return this.windowSum(this.clock.buckets);
  }

  hitsInWindow(): number {
    return this.windowSum(2 * this.clock.buckets);
  }

  segmentTokens(): number[] {
    return Array.from(this.seg);
  }

  prefix(): number[] {
    const out = new Array<number>(this.contextLength);
    let node: RadixNode | null = this;
    while (node !== null && node.contextLength > 0) {
      const start = node.contextLength - node.seg.length;
      const seg = node.seg;
      for (let i = 0; i < seg.length; i++) out[start + i] = seg[i]!;
      node = node.parent;
    }
    return out;
  }
}

interface HeapItem {
  readonly key: number;
  readonly node: RadixNode;
}

function itemLess(a: HeapItem, b: HeapItem): boolean {
  return a.key < b.key || (a.key === b.key && a.node.id < b.node.id);
}

/** Binary min-heap on (key, node id). Entries go stale lazily; the owner filters them. */
class LeafHeap {
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

class WorkerState {
  capacity = Number.POSITIVE_INFINITY;
  /** Tokens accounted to this worker. */
  used = 0;
  /** Nodes this worker caches (sizes the heap compaction). */
  nodes = 0;
  readonly heap = new LeafHeap();
  /** Per slot, the deepest node of what the slot holds (its length is that node's
   *  contextLength), null when empty: the whole slot mirror, one reference per slot. */
  readonly slots: (RadixNode | null)[] = [];

  constructor(readonly id: WorkerId) {}
}

class InFlight implements InFlightHandle {
  released = false;

  constructor(
    readonly owner: RadixTree,
    readonly workerId: WorkerId,
    readonly length: number,
    readonly state: WorkerState,
    readonly node: RadixNode | null,
    /** The prompt (the caller's array): a slot report of the same array starts from `node`. */
    readonly tokens: TokenIds,
  ) {}
}

export class RadixTree {
  private readonly root: RadixNode;
  private readonly workers = new Map<WorkerId, WorkerState>();
  private readonly clock: WindowClock;
  private readonly onEvict: ((workerId: WorkerId, evicted: readonly EvictedEntry[]) => void) | undefined;
  private readonly onRemove: ((nodeId: number) => void) | undefined;
  private readonly pathBuf: RadixNode[] = [];
  private nextId = 1;
  private protectEpoch = 0;
  private planEpoch = 0;
  private nodes = 0;
  private tokens = 0;
  readonly windowMs: number;

  constructor(options: RadixTreeOptions) {
    const windowMs = options.windowMs ?? 180_000;
    const buckets = options.windowBuckets ?? 12;
    if (!(windowMs > 0) || !Number.isFinite(windowMs)) throw new RangeError(`windowMs must be a positive number, got ${windowMs}`);
    if (!Number.isInteger(buckets) || buckets < 1) throw new RangeError(`windowBuckets must be a positive integer, got ${buckets}`);
    this.windowMs = windowMs;
    this.clock = { now: options.now, bucketMs: windowMs / buckets, buckets };
    this.onEvict = options.onEvict;
    this.onRemove = options.onRemove;
    this.root = new RadixNode(0, null, new Int32Array(0), 0, this.clock);
  }

  /** Nodes in the tree (the root not counted). */
  get nodeCount(): number {
    return this.nodes;
  }

  /** Distinct tokens stored in the tree (each segment once, whoever holds it). */
  get tokenCount(): number {
    return this.tokens;
  }

  /** Workers the tree has state for (cached tokens, a capacity or requests in flight). */
  workerIds(): WorkerId[] {
    return [...this.workers.keys()];
  }

  capacity(workerId: WorkerId): number {
    return this.workers.get(workerId)?.capacity ?? Number.POSITIVE_INFINITY;
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
    const ws = this.ensureWorker(workerId);
    ws.capacity = tokens;
    if (ws.used <= tokens) return NO_EVICTIONS;
    const evicted = this.planEviction(ws, ws.used - tokens, NO_PROTECTION, true);
    this.maybeCompact(ws);
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return evicted;
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

  /** The longest prefix of `tokens` the worker caches. Read-only, allocates nothing. */
  heldLength(workerId: WorkerId, tokens: TokenIds): number {
    return this.walkHeld(workerId, tokens, NO_PROTECTION);
  }

  /**
   * The worker now holds tokens[0..n). Touches the path (last access = now). When the new
   * tokens would exceed the worker's capacity, evicts its LRU leaves first (never the
   * prompt's own cached path, never a node with requests in flight on that worker); if
   * that is not enough, only the prefix that fits is recorded (`held` < n).
   */
  insert(workerId: WorkerId, tokens: TokenIds): InsertResult {
    const ws = this.ensureWorker(workerId);
    const now = this.clock.now();
    const n = tokens.length;
    const mark = ++this.protectEpoch;
    const held = this.walkHeld(workerId, tokens, mark);
    checkTokenIds(tokens, held, n); // before anything is evicted
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (ws.used + need > ws.capacity) {
      evicted = this.planEviction(ws, ws.used + need - ws.capacity, mark, true);
    }
    const room = ws.capacity - ws.used;
    const target = need <= room ? n : held + Math.max(0, room);
    if (target > 0) {
      const path = this.ensurePath(tokens, target);
      for (let i = 0; i < path.length; i++) this.cacheNode(ws, path[i]!, now);
      const last = path[path.length - 1]!;
      const lh = last.holder(workerId)!;
      if (lh.heldChildren === 0) this.pushLeaf(ws, last, lh);
      path.length = 0;
    }
    this.maybeCompact(ws);
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
    const ws = this.workers.get(workerId);
    // Nothing to evict while the worker has room: return before walking the prompt.
    if (ws === undefined || ws.used + tokensNeeded <= ws.capacity) return NO_EVICTIONS;
    let mark = NO_PROTECTION;
    if (protect !== undefined) {
      mark = ++this.protectEpoch;
      if (isPrefixMatch(protect)) this.markMatchedPath(workerId, protect, mark);
      else this.walkHeld(workerId, protect, mark);
    }
    return this.planEviction(ws, ws.used + tokensNeeded - ws.capacity, mark, false);
  }

  /**
   * The worker no longer holds tokens[0..n) nor any longer prefix that extends it (it still
   * holds tokens[0..n-1)); n = 0 drops everything it caches. A worker's own report, so
   * in-flight requests do not protect here (their counts stay). Returns the tokens freed.
   */
  evict(workerId: WorkerId, tokens: TokenIds): number {
    const ws = this.workers.get(workerId);
    if (ws === undefined) return 0;
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
        const seg = child.seg;
        const limit = Math.min(seg.length, n - pos);
        let i = 1;
        while (i < limit && seg[i] === tokens[pos + i]) i++;
        if (i < limit) return 0;
        if (!child.isCachedOn(workerId)) return 0;
        if (pos + i === n) {
          // Length n is the i-th token of this segment: cut just before it.
          if (i > 1) this.split(child, i - 1);
          victims.push(child);
          break;
        }
        pos += i;
        node = child;
      }
    }
    let freed = 0;
    const order: RadixNode[] = [];
    for (const victim of victims) {
      order.length = 0;
      const stack = [victim];
      while (stack.length > 0) {
        const x = stack.pop()!;
        order.push(x);
        for (const c of x.children.values()) if (c.isCachedOn(workerId)) stack.push(c);
      }
      // Reverse pre-order: every node after all of its descendants.
      for (let j = order.length - 1; j >= 0; j--) {
        const x = order[j]!;
        freed += x.seg.length;
        this.uncacheNode(ws, x, x.holder(workerId)!);
        this.prune(x);
      }
    }
    this.maybeCompact(ws);
    return freed;
  }

  /** Forgets the worker: its cached tokens, capacity and in-flight counts (its handles
   *  then release as no-ops). Returns the tokens it had cached. */
  dropWorker(workerId: WorkerId): number {
    const ws = this.workers.get(workerId);
    if (ws === undefined) return 0;
    this.workers.delete(workerId);
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
      this.prune(x);
    }
    return ws.used;
  }

  /**
   * A request over `tokens` was placed on the worker: counts it in flight on every node of
   * its path (creating the uncached part of the path, so it is protected and priced too),
   * records it in each node's window stats (a hit where the worker caches the node) and
   * touches the worker's cached nodes on it. Give the handle back to `removeInFlight`.
   */
  addInFlight(workerId: WorkerId, tokens: TokenIds): InFlightHandle {
    const ws = this.ensureWorker(workerId);
    const now = this.clock.now();
    if (tokens.length === 0) return new InFlight(this, workerId, 0, ws, null, tokens);
    const path = this.ensurePath(tokens, tokens.length);
    const { deepest, deepestHolder } = this.countRequest(path, workerId, now);
    const last = path[path.length - 1]!;
    path.length = 0;
    if (deepest !== null && deepestHolder !== null && deepestHolder.heldChildren === 0) {
      this.pushLeaf(ws, deepest, deepestHolder);
      this.maybeCompact(ws);
    }
    return new InFlight(this, workerId, tokens.length, ws, last, tokens);
  }

  /**
   * A request over `path` was placed on the worker: every node counts it in flight and records
   * a hit where the worker caches it (cached nodes form a prefix of the path: caches are
   * prefix-closed), and the cached ones are touched. Returns the deepest cached node.
   */
  private countRequest(path: readonly RadixNode[], workerId: WorkerId, now: number): { deepest: RadixNode | null; deepestHolder: Holder | null } {
    let deepest: RadixNode | null = null;
    let deepestHolder: Holder | null = null;
    for (let i = 0; i < path.length; i++) {
      const node = path[i]!;
      let h = node.holder(workerId);
      if (h === undefined) {
        h = new Holder(workerId);
        h.lastAccess = now;
        node.holders.push(h);
      }
      h.inFlight++;
      if (h.cached) {
        h.lastAccess = now;
        deepest = node;
        deepestHolder = h;
      }
      node.record(now, h.cached);
    }
    return { deepest, deepestHolder };
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
    const ws = this.ensureWorker(workerId);
    const now = this.clock.now();
    const path = this.ensurePath(tokens, n, match);
    const last = path[path.length - 1]!;
    // addInFlight's part: every node counts the request, records a hit where the worker caches it.
    const held = this.countRequest(path, workerId, now).deepest?.contextLength ?? 0;
    // addInFlight would push the deepest cached node as an LRU leaf here; insert below
    // either pushes that same entry again or gives the node a cached child, so it is left
    // out (heap entries only ever stand for a leaf at its last access time).
    // insert: every node of the path is now in flight on this worker, which already keeps
    // eviction off the prompt's own path.
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (ws.used + need > ws.capacity) evicted = this.planEviction(ws, ws.used + need - ws.capacity, NO_PROTECTION, true);
    const room = ws.capacity - ws.used;
    const target = need <= room ? n : held + Math.max(0, room);
    if (target > 0) {
      let deepest: RadixNode | null = null;
      for (let i = 0; i < path.length; i++) {
        let node = path[i]!;
        if (node.contextLength > target) {
          if (node.startLength >= target) break;
          node = this.split(node, target - node.startLength); // the head, cached below
        }
        this.cacheNode(ws, node, now);
        deepest = node;
        if (node.contextLength === target) break;
      }
      const dh = deepest!.holder(workerId)!;
      if (dh.heldChildren === 0) this.pushLeaf(ws, deepest!, dh);
    }
    path.length = 0;
    this.maybeCompact(ws);
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return new InFlight(this, workerId, n, ws, last, tokens);
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
    if (!Number.isInteger(slot) || slot < 0 || slot >= MAX_SLOTS) throw new RangeError(`slot must be an integer in [0, ${MAX_SLOTS}), got ${slot}`);
    const ws = this.ensureWorker(workerId);
    const previous = ws.slots[slot] ?? null;
    while (ws.slots.length <= slot) ws.slots.push(null);
    const n = tokens.length;
    if (n === 0) {
      ws.slots[slot] = null;
      const released = this.releaseSlot(ws, previous);
      this.maybeCompact(ws);
      return { held: 0, added: 0, evicted: NO_EVICTIONS, released };
    }
    const now = this.clock.now();
    const path = this.placedPath(ws, tokens, placed) ?? this.ensurePath(tokens, n);
    // Reference the part already cached first, so what the old and new content share is
    // never dropped in between.
    const mark = ++this.protectEpoch;
    let held = 0;
    let cachedNodes = 0;
    for (; cachedNodes < path.length; cachedNodes++) {
      const node = path[cachedNodes]!;
      const h = node.holder(workerId);
      if (h === undefined || !h.cached) break;
      h.slotRefs++;
      node.protectMark = mark;
      held = node.contextLength;
    }
    ws.slots[slot] = null;
    const released = this.releaseSlot(ws, previous);
    // Then as insert: make room for the rest (never evicting the content's own cached part)
    // and record what fits.
    const need = n - held;
    let evicted = NO_EVICTIONS;
    if (ws.used + need > ws.capacity) evicted = this.planEviction(ws, ws.used + need - ws.capacity, mark, true);
    const room = ws.capacity - ws.used;
    const target = need <= room ? n : held + Math.max(0, room);
    let deepest: RadixNode | null = null;
    for (let i = 0; i < path.length; i++) {
      let node = path[i]!;
      if (node.contextLength > target) {
        if (node.startLength >= target) break;
        node = this.split(node, target - node.startLength);
      }
      this.cacheNode(ws, node, now);
      if (i >= cachedNodes) node.holder(workerId)!.slotRefs++; // the first ones have theirs
      deepest = node;
      if (node.contextLength === target) break;
    }
    if (deepest !== null) {
      const dh = deepest.holder(workerId)!;
      if (dh.heldChildren === 0) this.pushLeaf(ws, deepest, dh);
    }
    // What did not fit and nobody else has: insert would not have created it.
    if (target < n) this.prune(path[path.length - 1]!);
    path.length = 0;
    ws.slots[slot] = deepest;
    this.maybeCompact(ws);
    if (evicted.length > 0) this.onEvict?.(workerId, evicted);
    return { held: target, added: target - held, evicted, released };
  }

  /** The path of a live placement of `tokens` on the worker (its in-flight path: whole
   *  nodes from the root to tokens.length, kept by its in-flight counts; a split keeps the
   *  deeper part's identity), in the scratch path array; undefined when `placed` is not one. */
  private placedPath(ws: WorkerState, tokens: TokenIds, placed: InFlightHandle | undefined): RadixNode[] | undefined {
    if (!(placed instanceof InFlight) || placed.owner !== this || placed.released || placed.state !== ws || placed.tokens !== tokens) return undefined;
    let node = placed.node;
    if (node === null || !node.attached || node.contextLength !== tokens.length) return undefined;
    const path = this.pathBuf;
    path.length = 0;
    for (; node !== this.root; node = node.parent!) path.push(node);
    path.reverse();
    return path;
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
    if (this.workers.get(handle.workerId) !== handle.state) return false;
    let node = handle.node;
    while (node !== null && node !== this.root) {
      const parent = node.parent;
      const h = node.holder(handle.workerId)!;
      h.inFlight--;
      if (h.inFlight === 0 && !h.cached) node.removeHolder(h);
      this.prune(node);
      node = parent;
    }
    return true;
  }

  // ---- internals ----

  private ensureWorker(workerId: WorkerId): WorkerState {
    let ws = this.workers.get(workerId);
    if (ws === undefined) {
      ws = new WorkerState(workerId);
      this.workers.set(workerId, ws);
    }
    return ws;
  }

  /** Longest prefix of `tokens` the worker caches; marks the nodes walked (including one
   *  matched in part) with `mark` unless it is NO_PROTECTION. */
  private walkHeld(workerId: WorkerId, tokens: TokenIds, mark: number): number {
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
  private markMatchedPath(workerId: WorkerId, m: PrefixMatch, mark: number): void {
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
  private ensurePath(tokens: TokenIds, end: number, from?: PrefixMatch): RadixNode[] {
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
  private split(node: RadixNode, k: number): RadixNode {
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
      if (h.cached) this.workers.get(h.workerId)!.nodes++;
    }
    if (node.ring !== null) head.ring = node.ring.slice();
    head.protectMark = node.protectMark;
    this.nodes++;
    return head;
  }

  private cacheNode(ws: WorkerState, node: RadixNode, now: number): void {
    let h = node.holder(ws.id);
    if (h === undefined) {
      h = new Holder(ws.id);
      node.holders.push(h);
    }
    if (!h.cached) {
      h.cached = true;
      h.heldChildren = 0;
      ws.used += node.seg.length;
      ws.nodes++;
      const parent = node.parent!;
      if (parent !== this.root) parent.holder(ws.id)!.heldChildren++;
    }
    h.lastAccess = now;
  }

  private uncacheNode(ws: WorkerState, node: RadixNode, h: Holder): void {
    if (h.slotRefs > 0) {
      // Slots end here (the node is the worker's leaf when it goes): they now hold the
      // parent's prefix as far as the tree knows; the parent already counts them.
      const slots = ws.slots;
      const parent = node.parent === this.root ? null : node.parent;
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
    ws.used -= node.seg.length;
    ws.nodes--;
    if (h.inFlight === 0) node.removeHolder(h);
    const parent = node.parent!;
    if (parent !== this.root) {
      const ph = parent.holder(ws.id)!;
      ph.heldChildren--;
      if (ph.heldChildren === 0 && ph.cached) this.pushLeaf(ws, parent, ph);
    }
  }

  /**
   * A slot no longer holds the path that ends at `node` (null: it held nothing). Every node
   * of it loses one slot reference; one that no slot holds any more and that has no request
   * of the worker in flight is dropped with what the worker caches below it (orphans: every
   * slot and every request in flight that reaches below a node reaches the node). Returns the
   * tokens the worker no longer holds.
   */
  private releaseSlot(ws: WorkerState, node: RadixNode | null): number {
    let freed = 0;
    while (node !== null && node !== this.root) {
      const parent: RadixNode = node.parent!;
      const h = node.holder(ws.id)!;
      h.slotRefs--;
      if (h.slotRefs === 0 && h.inFlight === 0 && h.cached) {
        if (h.heldChildren > 0) freed += this.dropBelow(ws, node);
        freed += node.seg.length;
        this.uncacheNode(ws, node, h);
        this.prune(node);
      }
      node = parent;
    }
    return freed;
  }

  /** Uncaches everything the worker caches strictly below `node`, leaves first. */
  private dropBelow(ws: WorkerState, node: RadixNode): number {
    const order: RadixNode[] = [];
    const stack: RadixNode[] = [];
    for (const c of node.children.values()) if (c.isCachedOn(ws.id)) stack.push(c);
    while (stack.length > 0) {
      const x = stack.pop()!;
      order.push(x);
      for (const c of x.children.values()) if (c.isCachedOn(ws.id)) stack.push(c);
    }
    let freed = 0;
    for (let j = order.length - 1; j >= 0; j--) {
      const x = order[j]!;
      freed += x.seg.length;
      this.uncacheNode(ws, x, x.holder(ws.id)!);
      this.prune(x);
    }
    return freed;
  }

  /** Removes a node nobody caches or has in flight (its children are gone by then). */
  private prune(node: RadixNode): void {
    if (!node.attached || node.holders.length > 0 || node.children.size > 0) return;
    node.parent!.children.delete(node.seg[0]!);
    node.attached = false;
    this.nodes--;
    this.tokens -= node.seg.length;
    this.onRemove?.(node.id);
  }

  private pushLeaf(ws: WorkerState, node: RadixNode, h: Holder): void {
    ws.heap.push({ key: h.lastAccess, node });
  }

  private isLeafItem(ws: WorkerState, item: HeapItem): boolean {
    const h = item.node.holder(ws.id);
    return h !== undefined && h.cached && h.heldChildren === 0 && h.lastAccess === item.key;
  }

  /** Drops stale heap entries once they outnumber the live ones. */
  private maybeCompact(ws: WorkerState): void {
    const heap = ws.heap;
    if (heap.size <= 2 * ws.nodes + 64) return;
    const mark = ++this.planEpoch;
    const keep: HeapItem[] = [];
    for (const item of heap.items) {
      if (!this.isLeafItem(ws, item)) continue;
      const h = item.node.holder(ws.id)!;
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
  private planEviction(ws: WorkerState, excess: number, protectMark: number, apply: boolean): EvictedEntry[] {
    const out: EvictedEntry[] = [];
    if (!(excess > 0)) return out;
    const heap = ws.heap;
    const putBack: HeapItem[] = [];
    const exposed = apply ? null : new LeafHeap();
    const remaining = apply ? null : new Map<RadixNode, number>();
    const mark = ++this.planEpoch;
    let freed = 0;
    while (freed < excess) {
      let top = heap.peek();
      while (top !== undefined && !this.isLeafItem(ws, top)) {
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
      const h = node.holder(ws.id)!;
      if (h.planMark === mark) continue; // a duplicate entry of a node already seen
      h.planMark = mark;
      if (h.inFlight > 0 || node.protectMark === protectMark) {
        if (fromMain) putBack.push(item);
        continue;
      }
      out.push({ workerId: ws.id, node, tokens: node.seg.length, contextLength: node.contextLength, lastAccess: h.lastAccess });
      freed += node.seg.length;
      if (apply) {
        this.uncacheNode(ws, node, h);
        this.prune(node);
      } else {
        if (fromMain) putBack.push(item);
        const parent = node.parent!;
        if (parent !== this.root) {
          const ph = parent.holder(ws.id)!;
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
