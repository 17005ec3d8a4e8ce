// The handle of a request in flight in the radix tree: which worker, which prompt, and the
// deepest node of its path. How the tree works: docs/scheduler-tree.md.
import type { TokenIds } from "../../common/tokens.js";
import type { RadixNode } from "./node.js";
import type { RadixTree } from "./tree.js";
import type { InFlightHandle, WorkerId } from "./types.js";
import type { WorkerCacheBook } from "./worker-cache-book.js";

export class InFlight implements InFlightHandle {
  released = false;

  constructor(
    readonly owner: RadixTree,
    readonly workerId: WorkerId,
    readonly length: number,
    /** The worker's book when the request was placed (a dropped worker gets a new one). */
    readonly book: WorkerCacheBook,
    readonly node: RadixNode | null,
    /** The prompt (the caller's array): a slot report of the same array starts from `node`. */
    readonly tokens: TokenIds,
  ) {}
}
