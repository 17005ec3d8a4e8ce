// How the radix tree keeps what it keeps: the token store (segments moved by compaction),
// the tokens of nodes that left the tree, the window counts of a node before its ring, and
// the scheduler's reusable match.
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/common/random.js";
import { UnreportedPlacements } from "../../src/scheduler/placement/unreported.js";
import { PromptMatch } from "../../src/scheduler/radix/prompt-match.js";
import { RadixTree } from "../../src/scheduler/radix/tree.js";
import type { InFlightHandle, RadixNodeView } from "../../src/scheduler/radix/types.js";

function randomPrompt(random: () => number, length: number): number[] {
  return Array.from({ length }, () => Math.floor(random() * 2000) - 1000);
}

describe("the token store", () => {
  it("keeps every segment's tokens while it compacts and grows under eviction churn", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.setCapacity("w", 5000);
    const random = mulberry32(3);
    const prompts: number[][] = [];
    for (let i = 0; i < 400; i++) {
      // Half the prompts continue an earlier one, so old segments (moved by compactions
      // since they were stored) are on the new prompt's path.
      const base = prompts.length > 0 && random() < 0.5 ? prompts[Math.floor(random() * prompts.length)]! : [];
      const prompt = [...base.slice(0, Math.floor(random() * base.length)), ...randomPrompt(random, 20 + Math.floor(random() * 300))];
      prompts.push(prompt);
      // Some come as the server's prompts do (Int32Array): segments then borrowed from them,
      // and copied in when a split leaves a part too short to borrow.
      tree.insert("w", random() < 0.3 ? Int32Array.from(prompt) : prompt);
      const m = tree.match(prompt);
      expect(m.perWorker.get("w")).toBe(prompt.length);
      for (const node of m.path) expect(node.prefix()).toEqual(prompt.slice(0, node.contextLength));
      // Every node still in the tree still spells the start of a prompt it was given, whatever
      // compactions moved since (a segment left behind reads another's tokens).
      if (i % 50 === 49) {
        const seen = new Set<RadixNodeView>();
        for (const earlier of prompts) for (const node of tree.match(earlier).path) seen.add(node);
        for (const node of seen) {
          const prefix = node.prefix();
          expect(prompts.some((p) => p.length >= prefix.length && prefix.every((t, k) => p[k] === t))).toBe(true);
        }
      }
    }
    expect(tree.cachedTokens("w")).toBeLessThanOrEqual(5000);
    // Far more tokens went through the store than it ever held at once.
    expect(prompts.reduce((sum, p) => sum + p.length, 0)).toBeGreaterThan(10 * 5000);
  });

  it("lets an eviction's entries keep their tokens, and says so of a node that left without them", () => {
    const tree = new RadixTree({ now: () => 0 });
    tree.setCapacity("w", 100);
    const random = mulberry32(5);
    const first = randomPrompt(random, 60);
    tree.insert("w", first);
    const second = randomPrompt(random, 80);
    const { evicted } = tree.insert("w", second);
    expect(evicted.map((e) => e.node.attached)).toEqual([false]);
    // Lots of churn after it: the store reuses the place the evicted segment had.
    for (let i = 0; i < 50; i++) tree.insert("w", randomPrompt(random, 90));
    expect(evicted[0]!.node.prefix()).toEqual(first);
    expect(evicted[0]!.node.segmentTokens()).toEqual(first);

    // A worker's own report drops a node without an eviction entry: its tokens go with it.
    const third = randomPrompt(random, 30);
    tree.insert("w", third);
    const view = tree.match(third).path[0]!;
    expect(tree.evict("w", [third[0]!])).toBe(30);
    expect(view.attached).toBe(false);
    expect(view.segmentLength).toBe(30);
    expect(() => view.prefix()).toThrow(/left the tree/);
  });
});

describe("a node's window counts before its ring", () => {
  it("reads as the ring would: one bucket, then others, a bucket that wraps around, a split", () => {
    const clock = { t: 0 };
    const tree = new RadixTree({ now: () => clock.t, windowMs: 1000, windowBuckets: 10 });
    const prompt = [1, 2, 3, 4];
    const recorded: { t: number; hit: boolean }[] = [];
    const expectCounts = () => {
      const newest = Math.floor(clock.t / 100);
      const inWindow = recorded.filter((r) => Math.floor(r.t / 100) > newest - 10 && Math.floor(r.t / 100) <= newest);
      for (const node of tree.match(prompt).path) {
        expect(node.requestsInWindow()).toBe(inWindow.length);
        expect(node.hitsInWindow()).toBe(inWindow.filter((r) => r.hit).length);
      }
    };
    const place = (t: number) => {
      clock.t = t;
      const hit = tree.heldLength("w", prompt) === prompt.length;
      tree.removeInFlight(tree.placeOn("w", prompt));
      recorded.push({ t, hit });
      expectCounts();
    };
    place(10);
    place(50); // the same bucket (counts before the ring), the second one a hit
    clock.t = 950;
    expectCounts();
    clock.t = 1005; // the bucket of t=10 and t=50 has left the window
    expectCounts();
    place(1010); // a second bucket: the ring takes over from the counts
    place(1090);
    place(2020); // ten buckets after 1010: the same place in the ring, emptied first
    tree.insert("v", [1, 2, 9]); // splits [1,2,3,4]: both halves carry the counts
    expect(tree.match(prompt).path.length).toBe(2);
    expectCounts();
    clock.t = 2500;
    expectCounts();
  });
});

describe("the scheduler's reusable match", () => {
  it("answers per worker as a fresh match does, and refills for the next prompt", () => {
    const random = mulberry32(9);
    const tree = new RadixTree({ now: () => 0 });
    const prompts = Array.from({ length: 30 }, (_, i) => [...(i % 3 === 0 ? [] : [7, 7, 7]), ...randomPrompt(random, 5 + (i % 7))]);
    for (const [i, p] of prompts.entries()) tree.insert(`w${i % 4}`, p.slice(0, p.length - (i % 3)));
    const reused = new PromptMatch();
    for (const prompt of prompts) {
      const fresh = tree.match(prompt);
      tree.matchInto(reused, prompt);
      expect([...reused.perWorker]).toEqual([...fresh.perWorker]);
      for (const w of ["w0", "w1", "w2", "w3", "nobody"]) expect(reused.heldOn(tree.account(w))).toBe(fresh.perWorker.get(w) ?? 0);
      expect([reused.matchedTokens, reused.longest, reused.path.map((n) => n.id)]).toEqual([fresh.matchedTokens, fresh.longest, fresh.path.map((n) => n.id)]);
    }
  });
});

describe("UnreportedPlacements", () => {
  it("behaves as a Map from prompt array to placement, whatever the order of the calls", () => {
    const random = mulberry32(13);
    const arrays = Array.from({ length: 6 }, (_, i) => [i]);
    const handles = Array.from({ length: 40 }, (_, i) => ({ workerId: "w", length: i, released: false }) as InFlightHandle);
    const placements = new UnreportedPlacements();
    const reference = new Map<readonly number[], InFlightHandle>();
    for (let i = 0; i < 5000; i++) {
      const tokens = arrays[Math.floor(random() * arrays.length)]!;
      const op = random();
      if (op < 0.45) {
        const handle = handles[Math.floor(random() * handles.length)]!;
        placements.set(tokens, handle);
        reference.set(tokens, handle);
      } else if (op < 0.8) {
        placements.delete(tokens);
        reference.delete(tokens);
      } else if (op < 0.99) {
        expect(placements.get(tokens)).toBe(reference.get(tokens));
      } else {
        placements.clear();
        reference.clear();
      }
      expect(placements.size).toBe(reference.size);
    }
    for (const tokens of arrays) expect(placements.get(tokens)).toBe(reference.get(tokens));
  });
});
