// The radix tree's public types: its options, the read-only view of a node, and what its
// calls return (matches, insert and slot results, eviction entries, in-flight handles).
// How the tree works: docs/scheduler-tree.md.
import type { TokenIds } from "../../common/tokens.js";

export type WorkerId = string;

export interface RadixTreeOptions {
  /** Injected clock, in milliseconds. */
  now: () => number;
  /** Sliding window of the per-node request statistics (Preble's H). Default: scheduler.windowMs's default. */
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

/** A worker's account in the tree, read live. */
export interface WorkerAccount {
  /** Tokens accounted to the worker (`cachedTokens`). */
  readonly used: number;
  readonly capacity: number;
  /** The worker was dropped (`dropWorker`) since: ask the tree for its account anew. */
  readonly dropped: boolean;
  /** Whether the worker ever reported what a slot holds (engines without slot reports never do). */
  readonly reportsSlots: boolean;
}

/** What LRU eviction would take from a worker, one node at a time (`evictionOrder`). */
export interface EvictionOrder {
  /** The next node the eviction would take (its whole segment), or undefined once enough
   *  room would be made or nothing else can go. */
  next(): RadixNodeView | undefined;
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
