import { mulberry32 } from "../../src/common/random.js";
import { describe, it, expect } from "vitest";
import { commonPrefixLength } from "../../src/common/tokens.js";
import type { RadixNode } from "../../src/scheduler/radix/node.js";
import { PromptMatch } from "../../src/scheduler/radix/prompt-match.js";
import { RadixTree } from "../../src/scheduler/radix/tree.js";
import type { EvictedEntry, InFlightHandle, RadixNodeView } from "../../src/scheduler/radix/types.js";

function manualClock(start = 0): { now: () => number; set: (t: number) => void; advance: (ms: number) => void } {
  let t = start;
  return {
    now: () => t,
    set: (v) => {
      t = v;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) out.push(i);
  return out;
}

/** [contextLength, tokens] of each entry, for compact comparisons. */
function shape(evicted: readonly EvictedEntry[]): [number, number][] {
  return evicted.map((e) => [e.contextLength, e.tokens]);
}

describe("RadixTree basics", () => {
  it("matches what a worker inserted, per worker and overall", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    const r = tree.insert("w0", [1, 2, 3, 4]);
    expect(r).toEqual({ held: 4, added: 4, evicted: [] });
    expect(tree.cachedTokens("w0")).toBe(4);

    const full = tree.match([1, 2, 3, 4, 5, 6]);
    expect(full.longest).toBe(4);
    expect(full.matchedTokens).toBe(4);
    expect(full.perWorker.get("w0")).toBe(4);
    expect(full.path.map((n) => n.contextLength)).toEqual([4]);

    const partial = tree.match([1, 2, 9]);
    expect(partial.longest).toBe(2);
    expect(partial.perWorker.get("w0")).toBe(2);
    expect(partial.path[0]?.contextLength).toBe(4); // matched in part

    const none = tree.match([7, 1, 2]);
    expect(none.longest).toBe(0);
    expect(none.perWorker.size).toBe(0);
    expect(none.path).toEqual([]);
    expect(tree.match([]).longest).toBe(0);
    expect(tree.heldLength("w0", [1, 2, 3])).toBe(3);
    expect(tree.heldLength("other", [1, 2, 3])).toBe(0);
  });

  it("splits a node where two prompts diverge and keeps context lengths", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.insert("a", [1, 2, 3, 4, 5]);
    tree.insert("b", [1, 2, 3, 8, 9, 10]);
    expect(tree.nodeCount).toBe(3);
    expect(tree.tokenCount).toBe(8);

    const m = tree.match([1, 2, 3, 8, 9, 10, 11]);
    expect(m.path.map((n) => [n.startLength, n.contextLength])).toEqual([
      [0, 3],
      [3, 6],
    ]);
    expect(m.path[0]!.cachedWorkers().sort()).toEqual(["a", "b"]);
    expect(m.path[1]!.cachedWorkers()).toEqual(["b"]);
    expect(m.path[1]!.segmentTokens()).toEqual([8, 9, 10]);
    expect(m.path[1]!.prefix()).toEqual([1, 2, 3, 8, 9, 10]);
    expect(m.perWorker.get("a")).toBe(3);
    expect(m.perWorker.get("b")).toBe(6);
    expect(m.longest).toBe(6);
    expect(tree.match([1, 2, 3, 4, 5]).perWorker.get("a")).toBe(5);

    // A prompt ending inside a node splits it too.
    tree.insert("c", [1, 2]);
    expect(tree.nodeCount).toBe(4);
    expect(tree.match([1, 2, 3]).path.map((n) => n.contextLength)).toEqual([2, 3]);
    expect(tree.match([1, 2, 3]).perWorker.get("c")).toBe(2);
  });

  it("accounts shared prefixes once per worker that holds them", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.insert("a", range(0, 100));
    tree.insert("a", [...range(0, 50), ...range(500, 520)]);
    tree.insert("b", range(0, 60));
    expect(tree.cachedTokens("a")).toBe(120);
    expect(tree.cachedTokens("b")).toBe(60);
    expect(tree.tokenCount).toBe(120);
    // Re-inserting what is held adds nothing.
    expect(tree.insert("b", range(0, 30)).added).toBe(0);
    expect(tree.cachedTokens("b")).toBe(60);
    expect(tree.cachedTokens("nobody")).toBe(0);
  });

  it("points into an Int32Array prompt for a new part of at least half its buffer, copies a smaller one", () => {
    const tree = new RadixTree({ now: () => 0 });
    const bufferOf = (tokens: number[]) => (tree.match(tokens).path.at(-1) as RadixNode).buf.buffer;
    const first = Int32Array.from(range(0, 100));
    tree.insert("a", first);
    expect(bufferOf(range(0, 100))).toBe(first.buffer); // all new: borrowed
    // 90 cached, 10 new: copied, so this prompt's buffer is not kept alive by 10 tokens.
    const turn = Int32Array.from([...range(0, 90), ...range(700, 710)]);
    tree.insert("a", turn);
    expect(bufferOf([...range(0, 90), ...range(700, 710)])).not.toBe(turn.buffer);
    // A view of 60 new tokens in a buffer of 200: 60 is less than half of that buffer.
    const big = new Int32Array(200);
    big.set(range(300, 360), 10);
    tree.insert("b", big.subarray(10, 70));
    expect(bufferOf(range(300, 360))).not.toBe(big.buffer);
    const exact = Int32Array.from(range(400, 460));
    tree.insert("b", exact.subarray(0, 40)); // 40 of 60: borrowed
    expect(bufferOf(range(400, 440))).toBe(exact.buffer);
    expect(tree.tokenCount).toBe(100 + 10 + 60 + 40);
    expect(tree.match(range(0, 100)).perWorker.get("a")).toBe(100);
    // Pruned segments, stored or borrowed, leave the count.
    tree.dropWorker("a");
    expect(tree.tokenCount).toBe(100);
    tree.dropWorker("b");
    expect(tree.tokenCount).toBe(0);
  });

  it("copies a borrowed piece that a split leaves shorter than half of its prompt's buffer", () => {
    const tree = new RadixTree({ now: () => 0 });
    const nodesOf = (tokens: number[]) => tree.match(tokens).path as RadixNode[];
    const first = Int32Array.from([1, 2, 3, 4, ...range(100, 196)]);
    tree.insert("a", first);
    // Shares 4 tokens with the first prompt: the first prompt's segment splits after them.
    const second = Int32Array.from([1, 2, 3, 4, ...range(500, 596)]);
    tree.insert("b", second);
    const [head, tail] = nodesOf([1, 2, 3, 4, ...range(100, 196)]);
    expect(head!.contextLength).toBe(4);
    expect(head!.buf.buffer).not.toBe(first.buffer); // 4 of 100: copied
    expect(tail!.buf.buffer).toBe(first.buffer); // 96 of 100: still borrowed
    expect(nodesOf([1, 2, 3, 4, ...range(500, 596)])[1]!.buf.buffer).toBe(second.buffer);
    // Once the first prompt's own tokens leave the tree, nothing keeps its buffer.
    tree.dropWorker("a");
    const left = [...nodesOf([1, 2, 3, 4, ...range(100, 196)]), ...nodesOf([1, 2, 3, 4, ...range(500, 596)])];
    expect(left.some((node) => node.buf.buffer === first.buffer)).toBe(false);
    expect(tree.match([1, 2, 3, 4, ...range(500, 596)]).perWorker.get("b")).toBe(100);
    expect(tree.tokenCount).toBe(100);
  });

  it("refuses token ids that are not 32-bit integers, before changing anything", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.setCapacity("w", 4);
    tree.insert("w", [1, 2, 3, 4]);
    for (const bad of [1.5, 2 ** 31, -(2 ** 31) - 1, Number.NaN]) {
      expect(() => tree.insert("w", [5, bad])).toThrow(RangeError);
      expect(() => tree.addInFlight("w", [1, 2, bad])).toThrow(RangeError);
      expect(tree.match([1, 2, 3, bad]).longest).toBe(3);
    }
    expect(tree.cachedTokens("w")).toBe(4);
    expect(tree.tokenCount).toBe(4);
    tree.insert("w", [-5, 2 ** 31 - 1]); // negative and extreme int32 ids are fine
    expect(tree.match([-5, 2 ** 31 - 1]).longest).toBe(2);
  });

  it("rejects a bad capacity and bad window settings", () => {
    const tree = new RadixTree({ now: () => 0 });
    expect(() => tree.setCapacity("a", -1)).toThrow(RangeError);
    expect(() => tree.setCapacity("a", 1.5)).toThrow(RangeError);
    expect(() => tree.setCapacity("a", Number.NaN)).toThrow(RangeError);
    expect(() => new RadixTree({ now: () => 0, windowMs: 0 })).toThrow(RangeError);
    expect(() => new RadixTree({ now: () => 0, windowBuckets: 0 })).toThrow(RangeError);
    tree.setCapacity("a", Number.POSITIVE_INFINITY);
    expect(tree.capacity("a")).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("RadixTree capacity and LRU eviction", () => {
  it("evicts the least recently used entry of that worker only", () => {
    const clock = manualClock();
    const seen: [string, [number, number][]][] = [];
    const tree = new RadixTree({ now: clock.now, onEvict: (w, ev) => seen.push([w, shape(ev)]) });
    tree.setCapacity("w", 10);
    tree.insert("other", range(200, 205)); // unbounded worker, must not be touched
    clock.set(1);
    tree.insert("w", range(0, 5)); // A
    clock.set(2);
    tree.insert("w", range(100, 105)); // B
    clock.set(3);
    tree.removeInFlight(tree.addInFlight("w", range(0, 5))); // A used again
    clock.set(4);
    const r = tree.insert("w", range(300, 305)); // C needs 5
    expect(shape(r.evicted)).toEqual([[5, 5]]);
    expect(r.evicted[0]!.node.prefix()).toEqual(range(100, 105));
    expect(r.evicted[0]!.lastAccess).toBe(2);
    expect(r.evicted[0]!.node.attached).toBe(false);
    expect(seen).toEqual([["w", [[5, 5]]]]);
    expect(tree.heldLength("w", range(0, 5))).toBe(5);
    expect(tree.heldLength("w", range(100, 105))).toBe(0);
    expect(tree.heldLength("w", range(300, 305))).toBe(5);
    expect(tree.cachedTokens("w")).toBe(10);
    expect(tree.cachedTokens("other")).toBe(5);
  });

  it("evicts leaf-most: a child before its (equally or more recent) parent, and stops once it fits", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.setCapacity("w", 9);
    clock.set(1);
    tree.insert("w", [1, 2, 3, 4, 5, 6]);
    clock.set(2);
    tree.insert("w", [1, 2, 3, 7]); // splits: [1,2,3] + [4,5,6] + [7]
    clock.set(3);
    const r = tree.insert("w", [9, 9, 9]); // needs 3, holds 7 of 9
    // [4,5,6] (t=1) is the oldest leaf; it alone frees enough.
    expect(shape(r.evicted)).toEqual([[6, 3]]);
    expect(tree.cachedTokens("w")).toBe(7);
    clock.set(4);
    // Needs 5, 2 free: [7] (t=2) goes, then its parent [1,2,3] (t=2, a leaf only now),
    // which is enough; [9,9,9] (t=3) stays.
    const r2 = tree.insert("w", [8, 8, 8, 8, 8]);
    expect(shape(r2.evicted)).toEqual([
      [4, 1],
      [3, 3],
    ]);
    expect(r2.evicted.map((e) => e.node.prefix())).toEqual([
      [1, 2, 3, 7],
      [1, 2, 3],
    ]);
    expect(tree.cachedTokens("w")).toBe(8);
    expect(tree.heldLength("w", [9, 9, 9])).toBe(3);
  });

  it("never evicts a node with requests in flight on that worker", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.setCapacity("w", 10);
    clock.set(1);
    tree.insert("w", range(0, 5)); // A, oldest
    clock.set(2);
    tree.insert("w", range(10, 15)); // B
    clock.set(3);
    const handle = tree.addInFlight("w", range(0, 5)); // A in flight (and touched)
    clock.set(4);
    tree.insert("w", range(20, 25)); // needs 5: B (t=2) is the LRU entry now
    expect(tree.heldLength("w", range(0, 5))).toBe(5);
    expect(tree.heldLength("w", range(10, 15))).toBe(0);

    // Make A the LRU entry again, still in flight: C (t=4) must go instead.
    clock.set(5);
    tree.insert("w", range(30, 35)); // evicts C
    expect(tree.heldLength("w", range(20, 25))).toBe(0);
    expect(tree.heldLength("w", range(0, 5))).toBe(5);

    // Everything else in flight too: a new prompt can only be held in part (nothing fits).
    const h2 = tree.addInFlight("w", range(30, 35));
    clock.set(6);
    const blocked = tree.insert("w", range(40, 46));
    expect(blocked).toEqual({ held: 0, added: 0, evicted: [] });
    expect(tree.cachedTokens("w")).toBe(10);

    // Once A's request ends, A (the LRU one) can go.
    expect(tree.removeInFlight(handle)).toBe(true);
    const r = tree.insert("w", range(40, 46));
    expect(r.evicted.map((e) => e.node.prefix())).toEqual([range(0, 5)]);
    expect(r.held).toBe(5); // 5 free after evicting A, 6 wanted: only the prefix that fits
    expect(tree.cachedTokens("w")).toBe(10);
    expect(tree.removeInFlight(h2)).toBe(true);
  });

  it("does not evict the prompt's own cached prefix to make room for its suffix", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.setCapacity("w", 8);
    clock.set(1);
    tree.insert("w", [1, 2, 3, 4]); // the prompt's prefix, the oldest entry
    clock.set(2);
    tree.insert("w", [7, 7]);
    clock.set(3);
    const r = tree.insert("w", [1, 2, 3, 4, 5, 6, 7, 8]); // needs 4, 2 free
    expect(r.evicted.map((e) => e.node.prefix())).toEqual([[7, 7]]);
    expect(r.held).toBe(8);
    expect(tree.cachedTokens("w")).toBe(8);
  });

  it("simulateEviction predicts insert exactly and changes nothing", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.setCapacity("w", 12);
    for (let i = 0; i < 4; i++) {
      clock.set(i + 1);
      tree.insert("w", [i, i, i]);
    }
    clock.set(10);
    const prompt = [2, 2, 2, 5, 5, 5, 5];
    const need = prompt.length - tree.heldLength("w", prompt);
    expect(need).toBe(4);
    const before = { nodes: tree.nodeCount, tokens: tree.tokenCount, cached: tree.cachedTokens("w") };
    const sim = tree.simulateEviction("w", need, prompt);
    const simAgain = tree.simulateEviction("w", need, prompt);
    expect({ nodes: tree.nodeCount, tokens: tree.tokenCount, cached: tree.cachedTokens("w") }).toEqual(before);
    expect(sim.map((e) => e.node.prefix())).toEqual([
      [0, 0, 0],
      [1, 1, 1],
    ]);
    expect(shape(simAgain)).toEqual(shape(sim));
    // Without protecting the prompt, its own prefix [2,2,2] is fair game (older than [3,3,3]).
    expect(tree.simulateEviction("w", 7).map((e) => e.node.prefix())).toEqual([
      [0, 0, 0],
      [1, 1, 1],
      [2, 2, 2],
    ]);
    expect(tree.simulateEviction("w", 0)).toEqual([]);
    expect(tree.simulateEviction("unknown", 100)).toEqual([]);
    const m = tree.match(prompt);
    expect(tree.simulateEviction("w", need, m).map((e) => e.node.id)).toEqual(sim.map((e) => e.node.id));
    const r = tree.insert("w", prompt);
    expect(r.evicted.map((e) => e.node.id)).toEqual(sim.map((e) => e.node.id));
    // A match whose path was split since is refused rather than trusted when an eviction
    // must be planned; growth below the path (the insert added a child to [2,2,2]) leaves it
    // valid. With room to spare nothing is walked, so nothing is checked.
    const overCapacity = tree.capacity("w") - tree.cachedTokens("w") + 1;
    expect(() => tree.simulateEviction("w", overCapacity, m)).not.toThrow();
    tree.insert("x", [2, 2]); // splits [2,2,2]
    expect(() => tree.simulateEviction("w", overCapacity, m)).toThrow(/stale/);
    expect(tree.simulateEviction("w", 0, m)).toEqual([]);
  });

  it("keeps exact LRU order through many touches (stale heap entries, compaction)", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    const rnd = mulberry32(7);
    const lastUse = new Map<number, number>();
    for (let i = 0; i < 10; i++) {
      clock.set(i);
      tree.insert("w", [i, i, i]);
      lastUse.set(i, i);
    }
    for (let round = 0; round < 2000; round++) {
      clock.set(10 + round);
      const i = 3 + Math.floor(rnd() * 7); // 0..2 stay untouched, the oldest
      if (round % 2 === 0) tree.insert("w", [i, i, i]);
      else tree.removeInFlight(tree.addInFlight("w", [i, i, i, 50 + i]));
      lastUse.set(i, 10 + round);
    }
    const expected = [...lastUse.entries()].sort((a, b) => a[1] - b[1]).map(([i]) => [i, i, i]);
    tree.setCapacity("w", 30);
    expect(tree.simulateEviction("w", 30).map((e) => e.node.prefix())).toEqual(expected);
    expect(tree.setCapacity("w", 0).map((e) => e.node.prefix())).toEqual(expected);
    expect(tree.nodeCount).toBe(0);
  });

  it("evicts a node once even when it was touched twice at the same instant", () => {
    const clock = manualClock(5);
    const tree = new RadixTree({ now: clock.now });
    tree.insert("w", [1, 1]);
    tree.insert("w", [1, 1]);
    tree.removeInFlight(tree.addInFlight("w", [1, 1]));
    clock.set(6);
    tree.insert("w", [2, 2]);
    tree.setCapacity("w", 4);
    const sim = tree.simulateEviction("w", 4);
    expect(sim.map((e) => e.node.prefix())).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(tree.setCapacity("w", 0).map((e) => e.node.prefix())).toEqual([
      [1, 1],
      [2, 2],
    ]);
  });

  it("lowering a capacity evicts LRU entries at once, keeping in-flight ones", () => {
    const clock = manualClock();
    const calls: number[] = [];
    const tree = new RadixTree({ now: clock.now, onEvict: (_w, ev) => calls.push(ev.length) });
    for (let i = 0; i < 5; i++) {
      clock.set(i);
      tree.insert("w", [i, i]);
    }
    const h = tree.addInFlight("w", [0, 0]);
    expect(tree.setCapacity("w", 20)).toEqual([]);
    const ev = tree.setCapacity("w", 4);
    expect(ev.map((e) => e.node.prefix())).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(calls).toEqual([3]);
    expect(tree.cachedTokens("w")).toBe(4);
    const stuck = tree.setCapacity("w", 1); // [4,4] goes, [0,0] is in flight
    expect(stuck.map((e) => e.node.prefix())).toEqual([[4, 4]]);
    expect(tree.cachedTokens("w")).toBe(2);
    expect(tree.insert("w", [9]).held).toBe(0); // over capacity: nothing new is recorded
    expect(tree.cachedTokens("w")).toBe(2);
    tree.removeInFlight(h);
    const r = tree.insert("w", [9]);
    expect(r.evicted.map((e) => e.node.prefix())).toEqual([[0, 0]]);
    expect(r.held).toBe(1);
    expect(tree.cachedTokens("w")).toBe(1);
  });
});

describe("RadixTree explicit eviction, dropWorker and pruning", () => {
  it("evict(worker, tokens) drops that prefix length and everything extending it", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.insert("a", [1, 2, 3, 4, 5]);
    tree.insert("a", [1, 2, 3, 6]);
    tree.insert("b", [1, 2, 3, 4, 5]);
    expect(tree.evict("a", [1, 2, 3, 4])).toBe(2); // [4,5] gone for a, split nowhere else
    expect(tree.heldLength("a", [1, 2, 3, 4, 5])).toBe(3);
    expect(tree.heldLength("a", [1, 2, 3, 6])).toBe(4);
    expect(tree.heldLength("b", [1, 2, 3, 4, 5])).toBe(5);
    expect(tree.evict("a", [1, 2])).toBe(3); // mid-node: cut between 1 and 2
    expect(tree.heldLength("a", [1, 2, 3, 6])).toBe(1);
    expect(tree.cachedTokens("a")).toBe(1);
    expect(tree.evict("a", [7])).toBe(0);
    expect(tree.evict("a", [1, 9])).toBe(0);
    expect(tree.evict("zzz", [1])).toBe(0);
    expect(tree.evict("a", [])).toBe(1);
    expect(tree.cachedTokens("a")).toBe(0);
    expect(tree.tokenCount).toBe(5); // [1,2,3,6] pruned, b's path stays
  });

  it("prunes nodes nobody holds or has in flight", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.insert("a", range(0, 10));
    tree.insert("b", [...range(0, 5), 42, 43]);
    const h = tree.addInFlight("c", [7, 8, 9]); // uncached path, alive while in flight
    expect(tree.tokenCount).toBe(15);
    expect(tree.match([7, 8, 9]).path[0]?.inFlight("c")).toBe(1);
    expect(tree.match([7, 8, 9]).longest).toBe(0);
    expect(tree.removeInFlight(h)).toBe(true);
    expect(tree.removeInFlight(h)).toBe(false);
    expect(h.released).toBe(true);
    expect(tree.tokenCount).toBe(12);
    tree.evict("b", []);
    expect(tree.tokenCount).toBe(10);
    tree.setCapacity("a", 0);
    expect(tree.cachedTokens("a")).toBe(0);
    expect(tree.nodeCount).toBe(0);
    expect(tree.tokenCount).toBe(0);
  });

  it("dropWorker forgets the worker, prunes its nodes and voids its handles", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.insert("a", range(0, 10));
    tree.insert("b", range(0, 4));
    tree.setCapacity("a", 50);
    const ha = tree.addInFlight("a", [...range(0, 10), 99]);
    const hb = tree.addInFlight("b", range(0, 3));
    expect(tree.dropWorker("a")).toBe(10);
    expect(tree.dropWorker("a")).toBe(0);
    expect(tree.workerIds()).toEqual(["b"]);
    expect(tree.capacity("a")).toBe(Number.POSITIVE_INFINITY);
    expect(tree.cachedTokens("a")).toBe(0);
    expect(tree.match(range(0, 10)).perWorker.get("a")).toBeUndefined();
    expect(tree.tokenCount).toBe(4);
    expect(tree.removeInFlight(ha)).toBe(false);
    // A worker re-registered under the same id does not inherit old handles.
    tree.insert("a", range(0, 2));
    const again = tree.addInFlight("a", range(0, 2));
    expect(tree.removeInFlight(ha)).toBe(false);
    expect(tree.match(range(0, 2)).path[0]?.inFlight("a")).toBe(1);
    expect(tree.removeInFlight(again)).toBe(true);
    expect(tree.removeInFlight(hb)).toBe(true);
    tree.dropWorker("b");
    tree.dropWorker("a");
    expect(tree.nodeCount).toBe(0);
    expect(tree.tokenCount).toBe(0);
  });

  it("a handle from another tree is refused", () => {
    const t1 = new RadixTree({ now: () => 0 });
    const t2 = new RadixTree({ now: () => 0 });
    const h = t1.addInFlight("w", [1, 2]);
    t2.addInFlight("w", [1, 2]);
    expect(t2.removeInFlight(h)).toBe(false);
    expect(t2.match([1, 2]).path[0]?.inFlight("w")).toBe(1);
  });
});

describe("RadixTree in-flight counts and window statistics", () => {
  it("counts requests and hits per node over a sliding window", () => {
    const clock = manualClock(0);
    const tree = new RadixTree({ now: clock.now, windowMs: 1000, windowBuckets: 10 });
    tree.insert("a", [1, 2, 3]);
    const h1 = tree.addInFlight("a", [1, 2, 3, 4, 5]); // hit on [1,2,3], miss on [4,5]
    clock.set(450);
    const h2 = tree.addInFlight("b", [1, 2, 3]); // miss on [1,2,3] (b holds nothing)
    const m = tree.match([1, 2, 3, 4, 5]);
    const [head, tail] = m.path;
    expect(m.longest).toBe(3);
    expect(head!.requestsInWindow()).toBe(2);
    expect(head!.hitsInWindow()).toBe(1);
    expect(tail!.requestsInWindow()).toBe(1);
    expect(tail!.hitsInWindow()).toBe(0);
    expect(head!.inFlight("a")).toBe(1);
    expect(head!.inFlight("b")).toBe(1);
    expect(head!.inFlightTotal).toBe(2);
    expect(tail!.inFlight("b")).toBe(0);
    expect(head!.lastAccess("a")).toBe(0);
    expect(head!.cachedWorkerCount).toBe(1);

    clock.set(1050); // the bucket of t=0 has left the window, t=450 is in
    expect(head!.requestsInWindow()).toBe(1);
    expect(head!.hitsInWindow()).toBe(0);
    expect(tail!.requestsInWindow()).toBe(0);
    clock.set(1500);
    expect(head!.requestsInWindow()).toBe(0);
    tree.removeInFlight(h1);
    tree.removeInFlight(h2);
    expect(tree.match([1, 2, 3, 4, 5]).path.length).toBe(1); // [4,5] pruned
    expect(head!.inFlightTotal).toBe(0);
  });

  it("a split copies in-flight counts and stats to both halves, and release still works", () => {
    const clock = manualClock(100);
    const tree = new RadixTree({ now: clock.now });
    const h = tree.addInFlight("w", [1, 2, 3, 4, 5, 6]);
    tree.insert("v", [1, 2, 3, 9]);
    const path = tree.match([1, 2, 3, 4, 5, 6]).path;
    expect(path.map((n) => n.contextLength)).toEqual([3, 6]);
    expect(path.map((n) => n.inFlight("w"))).toEqual([1, 1]);
    expect(path.map((n) => n.requestsInWindow())).toEqual([1, 1]);
    expect(tree.removeInFlight(h)).toBe(true);
    expect(tree.match([1, 2, 3, 4, 5, 6]).path.map((n) => n.contextLength)).toEqual([3]);
    expect(tree.match([1, 2, 3]).path[0]?.inFlight("w")).toBe(0);
    expect(tree.tokenCount).toBe(4);
  });

  it("addInFlight touches the worker's cached path (LRU)", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    tree.setCapacity("w", 4);
    clock.set(1);
    tree.insert("w", [1, 1]);
    clock.set(2);
    tree.insert("w", [2, 2]);
    clock.set(3);
    tree.removeInFlight(tree.addInFlight("w", [1, 1, 5])); // touches [1,1]
    expect(tree.match([1, 1]).path[0]?.lastAccess("w")).toBe(3);
    clock.set(4);
    expect(tree.insert("w", [3, 3]).evicted.map((e) => e.node.prefix())).toEqual([[2, 2]]);
  });
});

// ---------------------------------------------------------------------------------------
// Property test against a naive reference: per worker, every cached prefix as a string key
// with its last access time, per worker in-flight counts per prefix.

const key = (tokens: readonly number[], len: number): string => tokens.slice(0, len).join(",");

interface RefEntry {
  tokens: number[];
  t: number;
}

class Reference {
  readonly held = new Map<string, Map<string, RefEntry>>();
  readonly inflight = new Map<string, Map<string, number>>();
  readonly caps = new Map<string, number>();

  heldOf(w: string): Map<string, RefEntry> {
    let m = this.held.get(w);
    if (!m) this.held.set(w, (m = new Map()));
    return m;
  }

  cap(w: string): number {
    return this.caps.get(w) ?? Number.POSITIVE_INFINITY;
  }

  inflightOf(w: string, k: string): number {
    return this.inflight.get(w)?.get(k) ?? 0;
  }

  heldLen(w: string, seq: readonly number[], held = this.heldOf(w)): number {
    let i = 0;
    while (i < seq.length && held.has(key(seq, i + 1))) i++;
    return i;
  }

  touch(w: string, seq: readonly number[], len: number, t: number): void {
    const held = this.heldOf(w);
    for (let i = 1; i <= len; i++) held.set(key(seq, i), { tokens: seq.slice(0, i), t });
  }

  removeRange(held: Map<string, RefEntry>, prefix: readonly number[], start: number, end: number): void {
    for (let l = start + 1; l <= end; l++) held.delete(key(prefix, l));
  }

  /** Every token stored in some form (cached or in flight) by any worker. */
  liveKeys(): Set<string> {
    const out = new Set<string>();
    for (const m of this.held.values()) for (const k of m.keys()) out.add(k);
    for (const m of this.inflight.values()) for (const [k, c] of m) if (c > 0) out.add(k);
    return out;
  }
}

function leaves(held: Map<string, RefEntry>): RefEntry[] {
  const parents = new Set<string>();
  for (const e of held.values()) parents.add(key(e.tokens, e.tokens.length - 1));
  return [...held.entries()].filter(([k]) => !parents.has(k)).map(([, e]) => e);
}

/**
 * Checks an eviction plan step by step against the reference: each entry is a held range of
 * the worker, a leaf of its cache, not in flight, not on the protected prompt's cached path,
 * the least recently used of all such leaves; it stops as soon as `need` fits, and only
 * stops early when nothing evictable is left.
 */
function checkPlan(tree: RadixTree, ref: Reference, w: string, need: number, protect: readonly number[] | null, plan: readonly EvictedEntry[]): void {
  const held = new Map(ref.heldOf(w));
  const cap = ref.cap(w);
  const evictable = (e: RefEntry): boolean => {
    if (ref.inflightOf(w, key(e.tokens, e.tokens.length)) > 0) return false;
    if (protect === null) return true;
    const last = tree.match(e.tokens).path.at(-1)!;
    expect(last.contextLength).toBe(e.tokens.length); // held prefixes end on node boundaries
    return commonPrefixLength(e.tokens, protect) <= last.startLength;
  };
  for (const entry of plan) {
    expect(held.size + need).toBeGreaterThan(cap);
    expect(entry.workerId).toBe(w);
    const prefix = entry.node.prefix();
    const end = entry.contextLength;
    const start = end - entry.tokens;
    expect(prefix.length).toBe(end);
    expect(entry.tokens).toBeGreaterThan(0);
    const leaf = held.get(key(prefix, end));
    expect(leaf).toBeDefined();
    for (let l = start + 1; l <= end; l++) expect(held.get(key(prefix, l))?.t).toBe(leaf!.t);
    expect(entry.lastAccess).toBe(leaf!.t);
    const candidates = leaves(held).filter(evictable);
    expect(candidates.map((c) => key(c.tokens, c.tokens.length))).toContain(key(prefix, end));
    expect(leaf!.t).toBe(Math.min(...candidates.map((c) => c.t)));
    ref.removeRange(held, prefix, start, end);
  }
  if (held.size + need > cap) expect(leaves(held).filter(evictable)).toEqual([]);
}

function runProperty(seed: number, ops: number, kind: PromptKind = "array"): void {
  const rnd = mulberry32(seed);
  const int = (n: number): number => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  let now = 0;
  const prompt = promptsOf(kind, rnd);
  const tree = new RadixTree({ now: () => now });
  const ref = new Reference();
  const workers = ["a", "b", "c"];
  const vocab = 2 + int(3);
  const baseCaps = [8 + int(20), 20 + int(30), Number.POSITIVE_INFINITY];
  workers.forEach((w, i) => {
    tree.setCapacity(w, baseCaps[i]!);
    ref.caps.set(w, baseCaps[i]!);
  });
  /** Highest cachedTokens allowed: the capacity, unless a lowered capacity was blocked by
   *  in-flight entries (then it may only shrink towards the capacity). */
  const ceiling = new Map(workers.map((w) => [w, ref.cap(w)]));

  const pool: number[][] = [];
  const randomSeq = (): number[] => {
    if (pool.length > 0 && rnd() < 0.75) {
      const base = pick(pool);
      const cut = int(base.length + 1);
      const tail = Array.from({ length: int(7) }, () => int(vocab));
      const seq = [...base.slice(0, cut), ...tail];
      if (seq.length > 0) return seq;
    }
    return Array.from({ length: 1 + int(12) }, () => int(vocab));
  };
  const handles: { handle: InFlightHandle; w: string; seq: number[]; live: boolean }[] = [];

  for (let op = 0; op < ops; op++) {
    now += int(3);
    const r = rnd();
    const w = pick(workers);
    if (r < 0.35) {
      const seq = randomSeq();
      pool.push(seq);
      if (pool.length > 40) pool.splice(int(pool.length), 1);
      const h = ref.heldLen(w, seq);
      const need = seq.length - h;
      expect(tree.heldLength(w, prompt(seq))).toBe(h);
      const sim = tree.simulateEviction(w, need, prompt(seq));
      checkPlan(tree, ref, w, need, seq, sim);
      const viaMatch = tree.simulateEviction(w, need, tree.match(prompt(seq)));
      expect(viaMatch.map((e) => e.node.id)).toEqual(sim.map((e) => e.node.id));
      const simShape = sim.map((e) => [e.contextLength, e.tokens, e.node.prefix().join(",")]);
      const ceil = ceiling.get(w)!;
      const res = tree.insert(w, prompt(seq));
      expect(res.evicted.map((e) => [e.contextLength, e.tokens, e.node.prefix().join(",")])).toEqual(simShape);
      const held = ref.heldOf(w);
      for (const e of res.evicted) ref.removeRange(held, e.node.prefix(), e.contextLength - e.tokens, e.contextLength);
      const room = ref.cap(w) - held.size;
      const target = need <= room ? seq.length : h + Math.max(0, room);
      expect(res.held).toBe(target);
      expect(res.added).toBe(target - h);
      ref.touch(w, seq, target, now);
      expect(tree.cachedTokens(w)).toBeLessThanOrEqual(ceil);
      ceiling.set(w, Math.max(ref.cap(w), tree.cachedTokens(w)));
    } else if (r < 0.55) {
      const seq = randomSeq();
      const m = tree.match(prompt(seq));
      let longest = 0;
      for (const x of workers) {
        const expected = ref.heldLen(x, seq);
        expect(m.perWorker.get(x) ?? 0).toBe(expected);
        longest = Math.max(longest, expected);
      }
      expect(m.longest).toBe(longest);
      expect(m.matchedTokens).toBeGreaterThanOrEqual(longest);
      let prev = 0;
      for (const node of m.path) {
        expect(node.startLength).toBe(prev);
        prev = node.contextLength;
        if (node.contextLength > m.matchedTokens) continue;
        for (const x of workers) {
          expect(node.inFlight(x)).toBe(ref.inflightOf(x, key(seq, node.contextLength)));
          expect(node.isCachedOn(x)).toBe(ref.heldOf(x).has(key(seq, node.contextLength)));
        }
      }
    } else if (r < 0.67) {
      const seq = randomSeq();
      const handle = tree.addInFlight(w, prompt(seq));
      let counts = ref.inflight.get(w);
      if (!counts) ref.inflight.set(w, (counts = new Map()));
      for (let i = 1; i <= seq.length; i++) counts.set(key(seq, i), (counts.get(key(seq, i)) ?? 0) + 1);
      ref.touch(w, seq, ref.heldLen(w, seq), now);
      handles.push({ handle, w, seq, live: true });
    } else if (r < 0.79) {
      if (handles.length === 0) continue;
      const i = int(handles.length);
      const entry = handles[i]!;
      handles.splice(i, 1);
      expect(tree.removeInFlight(entry.handle)).toBe(entry.live);
      if (entry.live) {
        const counts = ref.inflight.get(entry.w)!;
        for (let l = 1; l <= entry.seq.length; l++) counts.set(key(entry.seq, l), counts.get(key(entry.seq, l))! - 1);
      }
    } else if (r < 0.89) {
      const seq = randomSeq();
      const cut = int(seq.length + 1);
      const target = seq.slice(0, cut);
      const held = ref.heldOf(w);
      let freed = 0;
      for (const [k, e] of held) {
        if (e.tokens.length >= Math.max(cut, 1) && commonPrefixLength(e.tokens, target) === cut) {
          held.delete(k);
          freed++;
        }
      }
      expect(tree.evict(w, target)).toBe(freed);
    } else if (r < 0.95) {
      const need = int(25);
      const protect = rnd() < 0.5 ? randomSeq() : null;
      const before = [tree.nodeCount, tree.tokenCount, tree.cachedTokens(w)];
      const plan = protect === null ? tree.simulateEviction(w, need) : tree.simulateEviction(w, need, protect);
      checkPlan(tree, ref, w, need, protect, plan);
      expect([tree.nodeCount, tree.tokenCount, tree.cachedTokens(w)]).toEqual(before);
    } else if (r < 0.98) {
      const cap = rnd() < 0.5 ? baseCaps[workers.indexOf(w)]! : int(30);
      ref.caps.set(w, cap);
      const ev = tree.setCapacity(w, cap);
      checkPlan(tree, ref, w, 0, null, ev); // against the reference before the eviction
      const held = ref.heldOf(w);
      for (const e of ev) ref.removeRange(held, e.node.prefix(), e.contextLength - e.tokens, e.contextLength);
      ceiling.set(w, Math.max(cap, tree.cachedTokens(w)));
    } else {
      const had = ref.heldOf(w).size;
      expect(tree.dropWorker(w)).toBe(had);
      ref.held.delete(w);
      ref.inflight.delete(w);
      for (const h of handles) if (h.w === w) h.live = false;
      tree.setCapacity(w, ref.cap(w));
    }

    for (const x of workers) {
      expect(tree.cachedTokens(x)).toBe(ref.heldOf(x).size);
      expect(tree.cachedTokens(x)).toBeLessThanOrEqual(ceiling.get(x)!);
    }
    expect(tree.tokenCount).toBe(ref.liveKeys().size);
    expect(tree.nodeCount).toBeLessThanOrEqual(tree.tokenCount);
  }

  // Drain: with every request ended and every worker dropped, nothing is left.
  for (const h of handles) expect(tree.removeInFlight(h.handle)).toBe(h.live);
  for (const x of workers) tree.dropWorker(x);
  expect(tree.nodeCount).toBe(0);
  expect(tree.tokenCount).toBe(0);
}

describe("RadixTree against a naive reference (seeded random sequences)", () => {
  for (const seed of [1, 2, 3, 42, 1234, 99991, 2025, 777]) {
    it(`seed ${seed}`, () => {
      runProperty(seed, 1500);
    });
  }
  // The server's prompts are Int32Arrays, whose segments the tree may point into instead of copying.
  for (const seed of [1, 2, 3, 42, 1234]) {
    it(`seed ${seed}, prompts as Int32Arrays`, () => {
      runProperty(seed, 1500, "int32");
    });
  }
});

type PromptKind = "array" | "int32";

/** How a test hands its sequences to the tree: as they are, or as Int32Arrays (as the server
 *  does), half of them views into a larger buffer. */
function promptsOf(kind: PromptKind, rnd: () => number): (seq: number[]) => readonly number[] | Int32Array {
  if (kind === "array") return (seq) => seq;
  return (seq) => {
    if (rnd() < 0.5) return Int32Array.from(seq);
    const buffer = new Int32Array(seq.length + 1 + Math.floor(rnd() * 2 * seq.length));
    buffer.fill(-7);
    const view = buffer.subarray(1, 1 + seq.length);
    view.set(seq);
    return view;
  };
}

// ---------------------------------------------------------------------------------------
// placeOn(w, prompt) against addInFlight(w, prompt) then insert(w, prompt): two trees driven
// by the same random operations, compared through everything the public API shows.

function nodeState(node: RadixNodeView, workers: readonly string[]): unknown {
  return [
    node.id,
    node.startLength,
    node.contextLength,
    node.attached,
    node.requestsInWindow(),
    node.hitsInWindow(),
    node.inFlightTotal,
    workers.map((w) => [node.isCachedOn(w), node.lastAccess(w), node.inFlight(w)]),
  ];
}

function evictedState(evicted: readonly EvictedEntry[]): unknown {
  return evicted.map((e) => [e.workerId, e.node.id, e.tokens, e.contextLength, e.lastAccess]);
}

/** Every observable of the tree: sizes, per worker the cached tokens and the whole LRU
 *  eviction order (bounded workers), and every node on the paths of `prompts`. */
function snapshot(tree: RadixTree, workers: readonly string[], prompts: readonly number[][]): unknown {
  return {
    nodes: tree.nodeCount,
    tokens: tree.tokenCount,
    workers: workers.map((w) => {
      const cap = tree.capacity(w);
      const order = Number.isFinite(cap) ? evictedState(tree.simulateEviction(w, cap + 1)) : null;
      return [tree.cachedTokens(w), cap, order];
    }),
    paths: prompts.map((seq) => {
      const m = tree.match(seq);
      return [m.matchedTokens, m.longest, [...m.perWorker].sort(), m.path.map((node) => nodeState(node, workers))];
    }),
  };
}

function runPlaceOnEquivalence(seed: number, ops: number): { placed: number; evicting: number; partial: number; staleMatches: number } {
  const rnd = mulberry32(seed);
  const int = (n: number): number => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  let now = 0;
  const logA: unknown[] = [];
  const logB: unknown[] = [];
  const options = { now: () => now, windowMs: 40, windowBuckets: 4 };
  const a = new RadixTree({ ...options, onEvict: (w, ev) => logA.push([w, evictedState(ev)]) });
  const b = new RadixTree({ ...options, onEvict: (w, ev) => logB.push([w, evictedState(ev)]) });
  const workers = ["a", "b", "c"];
  const vocab = 2 + int(3);
  const caps = [6 + int(20), 16 + int(30), Number.POSITIVE_INFINITY];
  workers.forEach((w, i) => {
    a.setCapacity(w, caps[i]!);
    b.setCapacity(w, caps[i]!);
  });
  const pool: number[][] = [];
  const randomSeq = (): number[] => {
    if (pool.length > 0 && rnd() < 0.75) {
      const base = pick(pool);
      return [...base.slice(0, int(base.length + 1)), ...Array.from({ length: int(7) }, () => int(vocab))];
    }
    return Array.from({ length: int(13) }, () => int(vocab));
  };
  const handles: [InFlightHandle, InFlightHandle][] = [];
  const stats = { placed: 0, evicting: 0, partial: 0, staleMatches: 0 };
  const both = <T>(f: (tree: RadixTree) => T): [T, T] => [f(a), f(b)];

  for (let op = 0; op < ops; op++) {
    now += int(4);
    const w = pick(workers);
    const r = rnd();
    if (r < 0.45) {
      const seq = randomSeq();
      pool.push(seq);
      if (pool.length > 30) pool.splice(int(pool.length), 1);
      // A: one walk, from a fresh match, a stale one (the tree changed since), another
      // prompt's match (ignored), or none. B: the two calls.
      const how = int(4);
      let m = how === 1 || how === 2 ? a.match(how === 2 ? randomSeq() : seq) : undefined;
      if (how === 1 && rnd() < 0.5) {
        const other = randomSeq();
        const ww = pick(workers);
        a.insert(ww, other);
        b.insert(ww, other);
        stats.staleMatches++;
      }
      if (how === 3) m = a.match(seq);
      const evictionsBefore = logA.length;
      const heldBefore = b.heldLength(w, seq);
      const ha = a.placeOn(w, seq, m);
      const hb = b.addInFlight(w, seq);
      const res = b.insert(w, seq);
      expect(ha.length).toBe(hb.length);
      expect(ha.workerId).toBe(hb.workerId);
      handles.push([ha, hb]);
      stats.placed++;
      if (logA.length > evictionsBefore) stats.evicting++;
      if (res.held < seq.length && res.held >= heldBefore) stats.partial++;
    } else if (r < 0.55) {
      const seq = randomSeq();
      const [ra, rb] = both((t) => t.insert(w, seq));
      expect([ra.held, ra.added, evictedState(ra.evicted)]).toEqual([rb.held, rb.added, evictedState(rb.evicted)]);
    } else if (r < 0.63) {
      const seq = randomSeq();
      handles.push(both((t) => t.addInFlight(w, seq)));
    } else if (r < 0.83) {
      if (handles.length === 0) continue;
      const [ha, hb] = handles.splice(int(handles.length), 1)[0]!;
      expect(a.removeInFlight(ha)).toBe(b.removeInFlight(hb));
    } else if (r < 0.9) {
      const seq = randomSeq().slice(0, 1 + int(6));
      expect(a.evict(w, seq)).toBe(b.evict(w, seq));
    } else if (r < 0.97) {
      const cap = rnd() < 0.6 ? caps[workers.indexOf(w)]! : int(25);
      const [ea, eb] = both((t) => t.setCapacity(w, cap));
      expect(evictedState(ea)).toEqual(evictedState(eb));
    } else {
      expect(a.dropWorker(w)).toBe(b.dropWorker(w));
      a.setCapacity(w, caps[workers.indexOf(w)]!);
      b.setCapacity(w, caps[workers.indexOf(w)]!);
    }
    expect(logA).toEqual(logB);
    expect(snapshot(a, workers, pool)).toEqual(snapshot(b, workers, pool));
  }
  for (const [ha, hb] of handles) expect(a.removeInFlight(ha)).toBe(b.removeInFlight(hb));
  expect(snapshot(a, workers, pool)).toEqual(snapshot(b, workers, pool));
  return stats;
}

describe("RadixTree.placeOn is addInFlight then insert, over one walk (seeded random sequences)", () => {
  for (const seed of [1, 2, 3, 42, 1234, 99991]) {
    it(`seed ${seed}`, () => {
      const stats = runPlaceOnEquivalence(seed, 800);
      // The sequences reach the interesting cases: evictions, prompts that fit only in part,
      // matches that went stale.
      expect(stats.evicting).toBeGreaterThan(10);
      expect(stats.partial).toBeGreaterThan(0);
      expect(stats.staleMatches).toBeGreaterThan(10);
    });
  }

  it("keeps the window statistics of a placement a miss where the prompt was not cached", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.insert("w", [1, 2]);
    tree.placeOn("w", [1, 2, 3, 4], tree.match([1, 2, 3, 4]));
    const [head, tail] = tree.match([1, 2, 3, 4]).path;
    expect([head!.requestsInWindow(), head!.hitsInWindow()]).toEqual([1, 1]);
    expect([tail!.requestsInWindow(), tail!.hitsInWindow()]).toEqual([1, 0]);
    expect(tail!.isCachedOn("w")).toBe(true);
    expect(tail!.inFlight("w")).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------
// Slot reports (setSlot): per node and worker, how many slots hold it.

describe("RadixTree slot reports", () => {
  it("keeps a node while any slot holds it, drops what only the old content held", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.setSlot("w", 0, [1, 2, 3, 4]);
    tree.setSlot("w", 1, [1, 2, 7]);
    expect(tree.cachedTokens("w")).toBe(5);
    expect(tree.setSlot("w", 0, [9, 9]).released).toBe(2); // [3,4] goes, [1,2] is slot 1's
    expect(tree.heldLength("w", [1, 2, 3, 4])).toBe(2);
    expect(tree.heldLength("w", [1, 2, 7])).toBe(3);
    expect(tree.slotContent("w", 0)).toEqual([9, 9]);
    expect(tree.slotLength("w", 1)).toBe(3);
    expect(tree.setSlot("w", 1, []).released).toBe(3);
    expect(tree.cachedTokens("w")).toBe(2);
    expect(tree.tokenCount).toBe(2);
    // The same content again, or a longer turn of it, keeps everything.
    expect(tree.setSlot("w", 0, [9, 9]).released).toBe(0);
    expect(tree.setSlot("w", 0, [9, 9, 5]).added).toBe(1);
    expect(tree.cachedTokens("w")).toBe(3);
    expect(() => tree.setSlot("w", -1, [1])).toThrow(RangeError);
    expect(() => tree.setSlot("w", 1.5, [1])).toThrow(RangeError);
  });

  it("does not touch what other slots hold (their LRU times stay)", () => {
    const clock = manualClock();
    const tree = new RadixTree({ now: clock.now });
    clock.set(1);
    tree.setSlot("w", 0, [1, 1, 2, 2]);
    clock.set(2);
    tree.setSlot("w", 1, [1, 1, 3, 3]);
    clock.set(3);
    tree.setSlot("w", 2, [5, 5]);
    clock.set(10);
    tree.setSlot("w", 0, [7, 7]); // slot 0 leaves the shared prefix
    expect(tree.match([1, 1, 3, 3]).path.map((n) => n.lastAccess("w"))).toEqual([2, 2]);
    expect(tree.match([5, 5]).path[0]!.lastAccess("w")).toBe(3);
    // LRU order: slot 1's suffix (t=2), then [5,5] (t=3), then what slot 0 holds now.
    tree.setCapacity("w", tree.cachedTokens("w"));
    expect(tree.simulateEviction("w", tree.capacity("w")).map((e) => e.node.prefix())).toEqual([
      [1, 1, 3, 3],
      [1, 1],
      [5, 5],
      [7, 7],
    ]);
  });

  it("keeps a placement's estimate while it is in flight, drops it with its prefix afterwards", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.setSlot("w", 0, [1, 1, 2, 2]);
    const handle = tree.placeOn("w", [1, 1, 3, 3]); // placed, not reported yet
    tree.setSlot("w", 0, [9]); // the only slot on [1,1] moves on: the pending estimate stays
    expect(tree.heldLength("w", [1, 1, 3, 3])).toBe(4);
    expect(tree.heldLength("w", [1, 1, 2, 2])).toBe(2);
    expect(tree.removeInFlight(handle)).toBe(true);
    expect(tree.heldLength("w", [1, 1, 3, 3])).toBe(4); // an estimate that was never reported
    // The next slot that holds [1,1] and moves on takes the stale estimate with it.
    tree.setSlot("w", 1, [1, 1, 4]);
    expect(tree.setSlot("w", 1, [8]).released).toBe(5);
    expect(tree.heldLength("w", [1, 1, 3, 3])).toBe(0);
    expect(tree.cachedTokens("w")).toBe(2);
    expect(tree.tokenCount).toBe(2);
  });

  it("records a report as insert does within the capacity; an eviction that takes a slot's end shortens the slot", () => {
    const clock = manualClock();
    const evictions: number[][][] = [];
    const tree = new RadixTree({ now: clock.now, onEvict: (_w, ev) => evictions.push(ev.map((e) => e.node.prefix())) });
    tree.setCapacity("w", 7);
    clock.set(1);
    tree.setSlot("w", 0, [1, 1, 1, 2, 2]);
    clock.set(2);
    tree.setSlot("w", 1, [1, 1, 1, 3]);
    clock.set(3);
    const r = tree.setSlot("w", 2, [4, 4]); // needs 2, 1 free: [2,2] (t=1) goes
    expect([r.held, r.added, r.evicted.map((e) => e.node.prefix())]).toEqual([2, 2, [[1, 1, 1, 2, 2]]]);
    expect(evictions).toEqual([[[1, 1, 1, 2, 2]]]);
    expect(tree.slotLength("w", 0)).toBe(3); // slot 0 now ends at [1,1,1] as far as the tree knows
    expect(tree.slotContent("w", 0)).toEqual([1, 1, 1]);
    // Slot 1 moves on: [3] goes, [1,1,1] stays for slot 0.
    clock.set(4);
    expect(tree.setSlot("w", 1, [5]).released).toBe(1);
    expect(tree.heldLength("w", [1, 1, 1])).toBe(3);
    // A report that cannot fit is recorded in part: [4,4,6] is in flight, [1,1,1] is its own
    // prefix; only [5] (slot 1, which then holds nothing as far as the tree knows) can go.
    const h = tree.placeOn("w", [4, 4, 6]);
    expect(tree.cachedTokens("w")).toBe(7);
    clock.set(5);
    const big = tree.setSlot("w", 3, [1, 1, 1, 9, 9, 9, 9]);
    expect([big.held, big.added, big.evicted.map((e) => e.node.prefix())]).toEqual([4, 1, [[5]]]);
    expect(tree.slotContent("w", 3)).toEqual([1, 1, 1, 9]);
    expect(tree.slotLength("w", 1)).toBe(0);
    expect(tree.cachedTokens("w")).toBe(7);
    tree.removeInFlight(h);
    // Every slot moves off: all goes, the estimate [6] (never reported) with its prefix [4,4].
    expect([0, 1, 2, 3].map((slot) => tree.setSlot("w", slot, []).released)).toEqual([0, 0, 3, 4]);
    expect(tree.cachedTokens("w")).toBe(0);
    expect(tree.nodeCount).toBe(0);
  });
});

/** setSlot, placeOn, in-flight, insert and evict against a naive reference (no capacity). */
function runSlotProperty(seed: number, ops: number): void {
  const rnd = mulberry32(seed);
  const int = (n: number): number => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  let now = 0;
  const tree = new RadixTree({ now: () => now });
  const workers = ["a", "b"];
  const SLOTS = 4;
  const vocab = 2 + int(3);
  // Reference: per worker, cached prefixes (key -> last access), slot contents, in-flight counts.
  const cached = new Map(workers.map((w) => [w, new Map<string, { tokens: number[]; t: number }>()]));
  const slots = new Map(workers.map((w) => [w, Array.from({ length: SLOTS }, () => [] as number[])]));
  const inflight = new Map(workers.map((w) => [w, new Map<string, number>()]));
  const handles: { handle: InFlightHandle; w: string; seq: number[]; live: boolean }[] = [];
  const ended: InFlightHandle[] = [];
  const pool: number[][] = [];
  const randomSeq = (): number[] => {
    if (pool.length > 0 && rnd() < 0.8) {
      const base = pick(pool);
      return [...base.slice(0, int(base.length + 1)), ...Array.from({ length: int(5) }, () => int(vocab))];
    }
    return Array.from({ length: int(9) }, () => int(vocab));
  };
  const touch = (w: string, seq: readonly number[], len: number): void => {
    for (let l = 1; l <= len; l++) cached.get(w)!.set(key(seq, l), { tokens: seq.slice(0, l), t: now });
  };
  const refs = (w: string, k: string, len: number): number => slots.get(w)!.filter((c) => c.length >= len && key(c, len) === k).length;
  const heldLen = (w: string, seq: readonly number[]): number => {
    let i = 0;
    while (i < seq.length && cached.get(w)!.has(key(seq, i + 1))) i++;
    return i;
  };
  /** Drops prefix `k` (length len) and every cached extension of it. */
  const dropFrom = (w: string, prefix: readonly number[], len: number): void => {
    for (const [k, e] of cached.get(w)!) if (e.tokens.length >= len && key(e.tokens, len) === key(prefix, len)) cached.get(w)!.delete(k);
  };

  for (let op = 0; op < ops; op++) {
    now += int(3);
    const w = pick(workers);
    const r = rnd();
    if (r < 0.4) {
      const slot = int(SLOTS);
      // Often the report of a placement (the same array, its handle passed), sometimes with
      // the handle of another prompt or of an ended request (both must be ignored).
      const placedHere = handles.filter((h) => h.w === w);
      const from = placedHere.length > 0 && rnd() < 0.5 ? pick(placedHere) : undefined;
      const seq = from !== undefined && rnd() < 0.8 ? from.seq : randomSeq();
      const stale = rnd() < 0.5 ? ended : handles.map((h) => h.handle);
      const hint = from?.handle ?? (stale.length > 0 && rnd() < 0.3 ? pick(stale) : undefined);
      pool.push(seq);
      if (pool.length > 30) pool.splice(int(pool.length), 1);
      const old = slots.get(w)![slot]!;
      const before = cached.get(w)!.size;
      slots.get(w)![slot] = seq;
      touch(w, seq, seq.length);
      const afterAdd = cached.get(w)!.size;
      for (let l = old.length; l >= 1; l--) {
        const k = key(old, l);
        if (refs(w, k, l) === 0 && (inflight.get(w)!.get(k) ?? 0) === 0 && cached.get(w)!.has(k)) dropFrom(w, old, l);
      }
      const res = tree.setSlot(w, slot, seq, hint);
      expect(res.held).toBe(seq.length);
      expect(res.added).toBe(afterAdd - before);
      expect(res.released).toBe(afterAdd - cached.get(w)!.size);
    } else if (r < 0.55) {
      const seq = randomSeq();
      // placeOn records the whole prompt (insert); addInFlight touches the cached part only.
      const place = rnd() < 0.6;
      touch(w, seq, place ? seq.length : heldLen(w, seq));
      const handle = place ? tree.placeOn(w, seq, tree.match(seq)) : tree.addInFlight(w, seq);
      const counts = inflight.get(w)!;
      for (let l = 1; l <= seq.length; l++) counts.set(key(seq, l), (counts.get(key(seq, l)) ?? 0) + 1);
      handles.push({ handle, w, seq, live: true });
    } else if (r < 0.7) {
      if (handles.length === 0) continue;
      const entry = handles.splice(int(handles.length), 1)[0]!;
      expect(tree.removeInFlight(entry.handle)).toBe(entry.live);
      ended.push(entry.handle);
      if (entry.live) {
        const counts = inflight.get(entry.w)!;
        for (let l = 1; l <= entry.seq.length; l++) counts.set(key(entry.seq, l), counts.get(key(entry.seq, l))! - 1);
      }
    } else if (r < 0.8) {
      const seq = randomSeq();
      tree.insert(w, seq);
      touch(w, seq, seq.length);
    } else if (r < 0.95) {
      const cut = randomSeq().slice(0, int(4));
      const n = cut.length;
      let freed = 0;
      for (const [k, e] of cached.get(w)!) {
        if (e.tokens.length >= Math.max(n, 1) && commonPrefixLength(e.tokens, cut) === n) {
          cached.get(w)!.delete(k);
          freed++;
        }
      }
      // A slot whose content ran into what went now ends just before it.
      const ss = slots.get(w)!;
      for (let s = 0; s < SLOTS; s++) if (ss[s]!.length >= Math.max(n, 1) && commonPrefixLength(ss[s]!, cut) === n) ss[s] = ss[s]!.slice(0, Math.max(0, n - 1));
      expect(tree.evict(w, cut)).toBe(freed);
    } else {
      expect(tree.dropWorker(w)).toBe(cached.get(w)!.size);
      cached.get(w)!.clear();
      inflight.get(w)!.clear();
      slots.set(
        w,
        Array.from({ length: SLOTS }, () => []),
      );
      for (const h of handles) if (h.w === w) h.live = false;
    }

    const live = new Set<string>();
    for (const x of workers) {
      expect(tree.cachedTokens(x)).toBe(cached.get(x)!.size);
      for (const k of cached.get(x)!.keys()) live.add(k);
      for (const [k, c] of inflight.get(x)!) if (c > 0) live.add(k);
      for (let s = 0; s < SLOTS; s++) expect(tree.slotContent(x, s)).toEqual(slots.get(x)![s]);
    }
    expect(tree.tokenCount).toBe(live.size);
    for (const seq of pool) {
      const m = tree.match(seq);
      for (const x of workers) {
        expect(m.perWorker.get(x) ?? 0).toBe(heldLen(x, seq));
        for (const node of m.path) {
          if (node.contextLength > m.matchedTokens || !node.isCachedOn(x)) continue;
          expect(node.lastAccess(x)).toBe(cached.get(x)!.get(key(seq, node.contextLength))!.t);
        }
      }
    }
  }
}

describe("RadixTree slot reports against a naive reference (seeded random sequences)", () => {
  for (const seed of [5, 6, 7, 8, 1234]) {
    it(`seed ${seed}`, () => {
      runSlotProperty(seed, 1000);
    });
  }
});

/** The longest prefix of `tokens` an idle slot of the worker holds, as the scheduler reads it. */
function reusable(tree: RadixTree, workerId: string, tokens: number[]): number {
  const account = tree.account(workerId);
  return tree.matchInto(new PromptMatch(), tokens).reusableOn(account);
}

describe("PromptMatch.reusableOn: what a request admitted now would reuse", () => {
  it("is the longest prefix an idle slot holds, through splits, partial matches and slots turning busy and idle", () => {
    const tree = new RadixTree({ now: () => 0 });
    const doc = range(100, 140);
    tree.setSlot("w", 0, [...doc, 1, 2, 3]);
    tree.setSlot("w", 1, [...doc.slice(0, 10), 9, 9]); // splits the document's node at 10
    tree.setSlot("w", 2, [7, 7, 7]);
    const prompt = [...doc, 1, 2, 8];
    expect(reusable(tree, "w", prompt)).toBe(42);
    tree.setSlotRunning("w", 0, true); // slot 0 runs a request: only slot 1's head is idle
    expect(reusable(tree, "w", prompt)).toBe(10);
    tree.setSlotRunning("w", 1, true);
    expect(reusable(tree, "w", prompt)).toBe(0);
    expect(reusable(tree, "other", prompt)).toBe(0);
    // A slot's new content while it runs is not reusable; once its request ends, it is.
    tree.setSlot("w", 0, [...doc, 5]);
    expect(reusable(tree, "w", [...doc, 5, 6])).toBe(0);
    tree.setSlotRunning("w", 0, false);
    expect(reusable(tree, "w", [...doc, 5, 6])).toBe(41);
    // A prompt that ends inside a slot's node reuses only what it has.
    expect(reusable(tree, "w", doc.slice(0, 25))).toBe(25);
    expect(() => tree.setSlotRunning("w", -1, true)).toThrow(RangeError);
  });

  it("agrees with the slots' own contents (seeded random slots, requests starting and ending, capacity cuts, two workers)", () => {
    for (const seed of [1, 2, 3, 4]) {
      const random = mulberry32(seed);
      const tree = new RadixTree({ now: () => 0 });
      const pick = (n: number) => Math.floor(random() * n);
      const heads = [range(0, 30), range(50, 70), range(200, 203)];
      const prompt = () => [...heads[pick(3)]!.slice(0, 1 + pick(30)), ...range(1000 + pick(5) * 10, 1000 + pick(5) * 10 + pick(8))];
      const running: Record<string, number[]> = { a: new Array(6).fill(0), b: new Array(6).fill(0) };
      for (let step = 0; step < 400; step++) {
        const worker = random() < 0.5 ? "a" : "b";
        const slot = pick(6);
        const roll = random();
        if (roll < 0.4) tree.setSlot(worker, slot, prompt());
        else if (roll < 0.6) {
          running[worker]![slot]!++;
          tree.setSlotRunning(worker, slot, true);
        } else if (roll < 0.8) {
          running[worker]![slot] = Math.max(0, running[worker]![slot]! - 1);
          tree.setSlotRunning(worker, slot, false);
        } else if (roll < 0.83) tree.setCapacity(worker, 40 + pick(80));
        else tree.placeOn(worker, prompt()); // an estimate no slot holds
        const tokens = prompt();
        for (const id of ["a", "b"]) {
          let expected = 0;
          for (let s = 0; s < 6; s++) if (running[id]![s] === 0) expected = Math.max(expected, commonPrefixLength(tree.slotContent(id, s), tokens));
          expect(reusable(tree, id, tokens)).toBe(expected);
        }
      }
    }
  });
});
