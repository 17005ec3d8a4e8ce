// A prompt matched against the radix tree: what `match` returns, and the scratch match the
// global scheduler refills for every placement. How the tree works: docs/scheduler-tree.md.
import type { TokenIds } from "../../common/tokens.js";
import type { RadixNode } from "./node.js";
import type { PrefixMatch, RadixNodeView, WorkerAccount, WorkerId } from "./types.js";
import type { WorkerCacheBook } from "./worker-cache-book.js";
import { emptyArray } from "../scratch.js";

const NO_TOKENS: TokenIds = [];

export class PromptMatch implements PrefixMatch {
  tokens: TokenIds = NO_TOKENS;
  matchedTokens = 0;
  longest = 0;
  /** The nodes walked, root side first; the last one may be matched only in part. */
  readonly nodes: RadixNode[] = [];
  /** The trie's version when the match was taken: while it is still the trie's, the
   *  nodes are still the tree's and still spell what was compared. */
  version = -1;
  /** Every (worker, cached prefix) the walk found, in walk order: a worker's last entry is
   *  its longest, since what a worker caches is prefix-closed. */
  private readonly heldBooks: WorkerCacheBook[] = [];
  private readonly heldLengths: number[] = [];
  /** The same for what the worker's idle slots hold (`Holder.idleSlotRefs`): what a request
   *  admitted there now would reuse. */
  private readonly reusableBooks: WorkerCacheBook[] = [];
  private readonly reusableLengths: number[] = [];
  private perWorkerMap: Map<WorkerId, number> | undefined;

  get path(): readonly RadixNodeView[] {
    return this.nodes;
  }

  /** Built on first read (the scheduler reads `heldOn` instead), in the order the walk met the workers. */
  get perWorker(): ReadonlyMap<WorkerId, number> {
    if (this.perWorkerMap === undefined) {
      const map = new Map<WorkerId, number>();
      for (let i = 0; i < this.heldBooks.length; i++) map.set(this.heldBooks[i]!.id, this.heldLengths[i]!);
      this.perWorkerMap = map;
    }
    return this.perWorkerMap;
  }

  /** The longest prefix of the prompt the worker whose account this is (the tree's
   *  `account`) caches, 0 when none. By identity: the scheduler's loop over its workers
   *  reads no account's id. */
  heldOn(account: WorkerAccount): number {
    return lengthOn(this.heldBooks, this.heldLengths, account);
  }

  /**
   * The longest prefix of the prompt an idle slot of the worker holds (0 when none). A
   * worker's local scheduler admits a request into an idle slot at once, and each slot has
   * its own KV cells: what only a running request's slot holds (or what a placed request is
   * still to compute) would be computed again in the new slot.
   */
  reusableOn(account: WorkerAccount): number {
    return lengthOn(this.reusableBooks, this.reusableLengths, account);
  }

  /** Starts a new match of `tokens` against the trie at `version`. */
  reset(tokens: TokenIds, version: number): void {
    this.tokens = tokens;
    this.version = version;
    this.matchedTokens = 0;
    this.longest = 0;
    emptyArray(this.nodes);
    emptyArray(this.heldBooks);
    emptyArray(this.heldLengths);
    emptyArray(this.reusableBooks);
    emptyArray(this.reusableLengths);
    this.perWorkerMap = undefined;
  }

  /** The walk found an idle slot of the worker holding the prompt's first `length` tokens. */
  reusable(book: WorkerCacheBook, length: number): void {
    this.reusableBooks.push(book);
    this.reusableLengths.push(length);
  }

  /** The walk found the worker caching the prompt's first `length` tokens. */
  held(book: WorkerCacheBook, length: number): void {
    this.heldBooks.push(book);
    this.heldLengths.push(length);
    this.longest = length;
  }
}

/** The length entered last for `account` (a worker's last entry is its longest), 0 when none. */
function lengthOn(books: readonly WorkerCacheBook[], lengths: readonly number[], account: WorkerAccount): number {
  for (let i = books.length - 1; i >= 0; i--) if (books[i] === account) return lengths[i]!;
  return 0;
}
