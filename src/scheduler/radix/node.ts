// A node of the radix tree (one segment of token ids, its per-worker holder records and its
// request and hit counts over the sliding window) and the holder record itself.
// How the tree works: docs/scheduler-tree.md.
import type { BucketWindow } from "../windowed-sum.js";
import type { RadixNodeView, WorkerId } from "./types.js";

/** The tree's clock and the window its per-node request statistics are kept over. */
export interface WindowClock {
  readonly now: () => number;
  readonly window: BucketWindow;
}

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
  /** Scratch mark of an eviction plan (dedupes heap entries). */
  planMark = 0;

  constructor(readonly workerId: WorkerId) {}
}

export class RadixNode implements RadixNodeView {
  readonly children = new Map<number, RadixNode>();
  readonly holders: Holder[] = [];
  /** The window ring of [requests, hits] (see BucketWindow), allocated on the first request. */
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

  /** A request touched this node at time t; `hit`: its worker held the node. */
  record(t: number, hit: boolean): void {
    const window = this.clock.window;
    const ring = (this.ring ??= window.allocate(2));
    window.add(ring, t, REQUESTS, 1);
    if (hit) window.add(ring, t, HITS, 1);
  }

  private windowSum(sum: number): number {
    const ring = this.ring;
    if (ring === null) return 0;
    const window = this.clock.window;
    return window.total(ring, window.bucketAt(this.clock.now()), sum);
  }

  requestsInWindow(): number {
    return this.windowSum(REQUESTS);
  }

  hitsInWindow(): number {
    return this.windowSum(HITS);
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
