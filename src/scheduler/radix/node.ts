// A node of the radix tree (one segment of token ids, its per-worker holder records and its
// request and hit counts over the sliding window) and the holder record itself.
// How the tree works: docs/scheduler-tree.md.
import type { BucketWindow, WindowRing } from "../windowed-sum.js";
import type { RadixNodeView, WorkerId } from "./types.js";
import type { WorkerCacheBook } from "./worker-cache-book.js";

/** The tree's clock and the window its per-node request statistics are kept over. */
export interface WindowClock {
  readonly now: () => number;
  readonly window: BucketWindow;
}

/** The segment of the root, and of a pruned node whose tokens went with it. */
export const NO_SEGMENT = new Int32Array(0);

/** A `protectMark` no node ever carries: protects nothing. */
export const NO_PROTECTION = -1;

/** The two sums of a node's window ring. */
const REQUESTS = 0;
const HITS = 1;

/** What one worker has on one node. */
export class Holder {
  cached = false;
  lastAccess = 0;
  inFlight = 0;
  /** Children this worker caches (meaningful while cached; 0 = a leaf of this worker). */
  heldChildren = 0;
  /** Slots of this worker whose reported content covers this node (> 0 only while cached). */
  slotRefs = 0;
  /** Those of them that run no request now (what a request admitted now could reuse). */
  idleSlotRefs = 0;
  /** A slot that was last set to end at this node (-1: none known): where `uncache` looks
   *  first. A hint only: that slot may have moved on since. */
  slot = -1;
  /** Scratch mark of an eviction plan (dedupes heap entries). */
  planMark = 0;
  /** The key of an entry of this record known to be in its worker's leaf heap (NaN: none
   *  known): pushing the same entry again would change nothing but the heap's size. */
  heapKey = Number.NaN;
  /** Scratch of a simulated eviction: while `exposeMark` is the plan's mark, the cached
   *  children the plan has not evicted yet (the node is exposed as a leaf at 0). */
  exposeMark = 0;
  exposeLeft = 0;

  /** The worker's book: its identity here (a dropped worker's records all go with it). */
  constructor(readonly book: WorkerCacheBook) {}

  get workerId(): WorkerId {
    return this.book.id;
  }
}

/** The children of every node that has none: most nodes are leaves, and a Map is costly to
 *  make. Only `addChild` puts a child in a node, and it gives the node a Map of its own first. */
const NO_CHILDREN: ReadonlyMap<number, RadixNode> = new Map();

export class RadixNode implements RadixNodeView {
  /** By first token. Read-only here: add with `addChild`. */
  children: ReadonlyMap<number, RadixNode> = NO_CHILDREN;
  readonly holders: Holder[] = [];
  /** The window ring of [requests, hits] (see BucketWindow), allocated once requests fall in
   *  a second bucket. Until then the one bucket and its counts are kept here instead: most
   *  nodes (a prompt's own suffix) get a single request in their life, and the ring would be
   *  a few hundred bytes to make for each (the sums read the same either way). */
  ring: WindowRing | null = null;
  soloBucket = Number.NaN;
  soloRequests = 0;
  soloHits = 0;
  protectMark = 0;
  attached = true;
  /** Its neighbours in the token store's list, while its segment is stored there. */
  storePrev: RadixNode | null = null;
  storeNext: RadixNode | null = null;

  constructor(
    readonly id: number,
    public parent: RadixNode | null,
    /** The segment: tokens segStart .. segStart + segLength of `buf`, while the node is
     *  attached the tree's token store or the prompt it borrows them from (see TokenStore). */
    public buf: Int32Array,
    public segStart: number,
    public segLength: number,
    readonly contextLength: number,
    private readonly clock: WindowClock,
  ) {}

  get segmentLength(): number {
    return this.segLength;
  }

  get startLength(): number {
    return this.contextLength - this.segLength;
  }

  /** Makes `child` this node's child under `firstToken` (replacing the one there). */
  addChild(firstToken: number, child: RadixNode): void {
    if (this.children === NO_CHILDREN) this.children = new Map();
    (this.children as Map<number, RadixNode>).set(firstToken, child);
  }

  /** Removes the child under `firstToken`. */
  removeChild(firstToken: number): void {
    if (this.children !== NO_CHILDREN) (this.children as Map<number, RadixNode>).delete(firstToken);
  }

  /** The segment's first token: the node's key among its parent's children. */
  get firstToken(): number {
    return this.buf[this.segStart]!;
  }

  holder(workerId: WorkerId): Holder | undefined {
    const hs = this.holders;
    for (let i = 0; i < hs.length; i++) {
      const h = hs[i]!;
      if (h.book.id === workerId) return h;
    }
    return undefined;
  }

  /** The record of the worker whose book this is (what the tree's own walks look up). */
  holderOf(book: WorkerCacheBook): Holder | undefined {
    const hs = this.holders;
    for (let i = 0; i < hs.length; i++) {
      const h = hs[i]!;
      if (h.book === book) return h;
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

  /** A request touched this node at time t; `hit`: its worker held the node. */
  record(t: number, hit: boolean): void {
    const window = this.clock.window;
    let ring = this.ring;
    if (ring === null) {
      const bucket = window.bucketAt(t);
      if (Number.isNaN(this.soloBucket) || this.soloBucket === bucket) {
        this.soloBucket = bucket;
        this.soloRequests += 1;
        if (hit) this.soloHits += 1;
        return;
      }
      // A second bucket: the ring takes over, from the counts so far.
      ring = this.ring = window.allocate(2);
      window.seed(ring, this.soloBucket, REQUESTS, this.soloRequests, HITS, this.soloHits);
    }
    window.addPair(ring, t, REQUESTS, 1, HITS, hit ? 1 : 0);
  }

  private windowSum(sum: number): number {
    const window = this.clock.window;
    const newest = window.bucketAt(this.clock.now());
    const ring = this.ring;
    if (ring === null) {
      if (!window.holds(newest, this.soloBucket)) return 0;
      return sum === REQUESTS ? this.soloRequests : this.soloHits;
    }
    return window.total(ring, newest, sum);
  }

  requestsInWindow(): number {
    return this.windowSum(REQUESTS);
  }

  hitsInWindow(): number {
    return this.windowSum(HITS);
  }

  segmentTokens(): number[] {
    this.checkTokensKept();
    return Array.from(this.buf.subarray(this.segStart, this.segStart + this.segLength));
  }

  /** Throws for a node that left the tree without its tokens (see TokenTrie.prune). */
  private checkTokensKept(): void {
    if (this.segLength > 0 && this.buf === NO_SEGMENT) {
      throw new Error(`radix node ${this.id} left the tree and its tokens with it (only eviction entries keep theirs)`);
    }
  }

  prefix(): number[] {
    const out = new Array<number>(this.contextLength);
    let node: RadixNode | null = this;
    while (node !== null && node.contextLength > 0) {
      node.checkTokensKept();
      const start = node.startLength;
      const { buf, segStart, segLength } = node;
      for (let i = 0; i < segLength; i++) out[start + i] = buf[segStart + i]!;
      node = node.parent;
    }
    return out;
  }
}
