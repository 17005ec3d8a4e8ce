// The token ids of every segment of one radix tree: in one Int32Array, or borrowed from the
// prompt that brought them. How the tree works: docs/scheduler-tree.md.
//
// A node used to own an Int32Array of its segment. Each placement creates a node for the
// prompt's new tokens, and an ArrayBuffer is slow to make (its backing store lives outside
// the JS heap) and slower still to collect (the engine counts those bytes and runs full
// collections to find them): that was a large share of a placement's time. Here a new
// segment is appended where the last one ended, a split cuts one segment in two without
// copying a token, and a segment that leaves the tree only adds to the dead count. Once the
// end of the array is reached, the live segments slide down over the dead space; the array
// doubles when they would fill more than two thirds of it, so at most two tokens are moved
// for every token appended. The store keeps its nodes in a list in the order their segments
// lie in (a new segment goes at the end, a split puts its head just before its tail), so
// sliding neither walks the tree nor sorts: it goes down the list and moves each run of
// adjacent segments at once. (Walking the tree and sorting its nodes took two thirds of a
// slide, about 0.5 ms of 0.7 on a tree of 2,000 nodes, all of it paid by the placement that
// triggered the slide: some 200 times a median placement.)
//
// Copying is still a placement's main cost when prompts are long and mostly new (a 10k-token
// prompt is 40 KB to write, and as much again to slide later). A prompt that comes as an
// Int32Array (the server's prompts do) is never written again, so a segment that makes up
// at least half of its buffer is not copied at all: the node points into the prompt's own
// array, which the tree then keeps alive. A smaller new part is copied (`buf.set`, a
// memcpy), so a long conversation's turns, each a few new tokens after a long cached prefix,
// never keep their whole prompts alive; and a split that leaves a borrowed part under half
// of its buffer copies that part (`settle`). So every borrowed segment is always at least
// half of the buffer it keeps alive.
import type { TokenIds } from "../../common/tokens.js";
import type { RadixNode } from "./node.js";

/** The capacity of a new store, in tokens: what a small tree (a test's) never outgrows. */
const INITIAL_TOKENS = 1024;

export class TokenStore {
  buf = new Int32Array(INITIAL_TOKENS);
  /** Where the next segment goes: everything from here on is free. */
  top = 0;
  /** Tokens of the segments of attached nodes, stored or borrowed. */
  live = 0;
  /** The nodes whose segments are in `buf`, in the order the segments lie in (linked through
   *  the nodes' storePrev / storeNext). A node is in the list exactly while its `buf` is this
   *  store's: a borrowed segment's buffer is a prompt's, never the store's. */
  private first: RadixNode | null = null;
  private last: RadixNode | null = null;

  /**
   * Makes tokens[from..from + length) `node`'s segment: a view of the prompt's own array when
   * it may be borrowed, else a copy in the store (compacting or growing first when it does
   * not fit). Unless one of them is not a 32-bit integer: then nothing is stored and it
   * returns false. Sets the node's `buf`, `segStart` and `segLength`.
   */
  append(node: RadixNode, tokens: TokenIds, from: number, length: number): boolean {
    if (tokens instanceof Int32Array) {
      this.live += length;
      node.segLength = length;
      if (borrowable(length, tokens)) {
        node.buf = tokens;
        node.segStart = from;
      } else {
        this.copyIn(node, tokens, from);
      }
      return true;
    }
    const at = this.reserve(length);
    const buf = this.buf;
    const shift = at - from;
    const end = from + length;
    let bad = false;
    let j = from;
    // Eight at a time (a third faster than one at a time: the copy is most of what a
    // placement's new tokens cost). A token that is not a 32-bit integer is stored wrapped
    // but found: nothing is kept then.
    for (; j + 8 <= end; j += 8) {
      const t0 = tokens[j]!;
      const t1 = tokens[j + 1]!;
      const t2 = tokens[j + 2]!;
      const t3 = tokens[j + 3]!;
      const t4 = tokens[j + 4]!;
      const t5 = tokens[j + 5]!;
      const t6 = tokens[j + 6]!;
      const t7 = tokens[j + 7]!;
      buf[shift + j] = t0;
      buf[shift + j + 1] = t1;
      buf[shift + j + 2] = t2;
      buf[shift + j + 3] = t3;
      buf[shift + j + 4] = t4;
      buf[shift + j + 5] = t5;
      buf[shift + j + 6] = t6;
      buf[shift + j + 7] = t7;
      if (
        (t0 | 0) !== t0 ||
        (t1 | 0) !== t1 ||
        (t2 | 0) !== t2 ||
        (t3 | 0) !== t3 ||
        (t4 | 0) !== t4 ||
        (t5 | 0) !== t5 ||
        (t6 | 0) !== t6 ||
        (t7 | 0) !== t7
      ) {
        bad = true;
      }
    }
    for (; j < end; j++) {
      const t = tokens[j]!;
      buf[shift + j] = t;
      if ((t | 0) !== t) bad = true;
    }
    if (bad) return false;
    this.live += length;
    node.segLength = length;
    this.commit(node, at);
    return true;
  }

  /**
   * After a split cut `node`'s segment: a borrowed segment no longer borrowable (less than
   * half of its prompt's buffer) is copied into the store, so that every borrowed segment
   * stays at least half of the buffer it keeps alive (else a short head, say the template's
   * first tokens that every chat shares, could keep a long prompt alive after the rest of it
   * is gone).
   */
  settle(node: RadixNode): void {
    if (node.buf !== this.buf && !borrowable(node.segLength, node.buf)) this.copyIn(node, node.buf, node.segStart);
  }

  /** A split made `head` of the first part of `tail`'s segment, where it was: a stored head
   *  goes in the list just before its tail. (Settle both after this.) */
  splitOff(head: RadixNode, tail: RadixNode): void {
    if (tail.buf !== this.buf) return;
    const prev = tail.storePrev;
    head.storePrev = prev;
    head.storeNext = tail;
    tail.storePrev = head;
    if (prev === null) this.first = head;
    else prev.storeNext = head;
  }

  /** Copies source[from..from + node.segLength) into the store as `node`'s segment. */
  private copyIn(node: RadixNode, source: Int32Array, from: number): void {
    const at = this.reserve(node.segLength);
    this.buf.set(source.subarray(from, from + node.segLength), at);
    this.commit(node, at);
  }

  /** Where `length` tokens go next (compacting or growing first when they do not fit). */
  private reserve(length: number): number {
    if (this.top + length > this.buf.length) this.compact(length);
    return this.top;
  }

  /** `node`'s segment (a new one, or one it borrowed) is now the `node.segLength` tokens
   *  written at `at`, the store's top: the last in the list. */
  private commit(node: RadixNode, at: number): void {
    this.top = at + node.segLength;
    node.buf = this.buf;
    node.segStart = at;
    node.storePrev = this.last;
    node.storeNext = null;
    if (this.last === null) this.first = node;
    else this.last.storeNext = node;
    this.last = node;
  }

  /** The segment of a node that leaves the tree is dead space from now on. (Nothing else of
   *  the store is touched: its neighbours in the array are other nodes, likely long unused.) */
  release(node: RadixNode): void {
    this.live -= node.segLength;
    if (node.buf !== this.buf) return;
    const { storePrev: prev, storeNext: next } = node;
    if (prev === null) this.first = next;
    else prev.storeNext = next;
    if (next === null) this.last = prev;
    else next.storePrev = prev;
    node.storePrev = null;
    node.storeNext = null;
  }

  /** Makes room for `need` more tokens at `top`: slides the live segments down, in a larger
   *  array when they would leave less than a third of this one free. */
  private compact(need: number): void {
    const old = this.buf;
    // Borrowed segments stay where they are.
    let stored = 0;
    for (let node = this.first; node !== null; node = node.storeNext) stored += node.segLength;
    const wanted = stored + need;
    const target = 3 * wanted > 2 * old.length ? new Int32Array(Math.max(INITIAL_TOKENS, 2 * wanted)) : old;
    // Within the same array a segment only ever moves down, over space already free, when
    // they move in the order they lie in.
    let top = 0;
    let node = this.first;
    while (node !== null) {
      // A run of segments that lie back to back moves as one.
      const runStart = node.segStart;
      let runEnd = runStart;
      const shift = runStart - top;
      for (; node !== null && node.segStart === runEnd; node = node.storeNext) {
        runEnd += node.segLength;
        node.buf = target;
        node.segStart -= shift;
      }
      if (target !== old) target.set(old.subarray(runStart, runEnd), top);
      else if (shift !== 0) old.copyWithin(top, runStart, runEnd);
      top += runEnd - runStart;
    }
    this.buf = target;
    this.top = top;
  }
}

/** Whether a segment of `length` tokens of `prompt` may point into it: at least half of the
 *  buffer it would keep alive (a view may be part of a larger one). */
function borrowable(length: number, prompt: Int32Array): boolean {
  return 2 * length * Int32Array.BYTES_PER_ELEMENT >= prompt.buffer.byteLength;
}
