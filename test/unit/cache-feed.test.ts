// What a host publishes about its slots (CacheFeed) and what a router rebuilds from it
// (HostMirror): the router's mirror matches the host's slots after any sequence of changes,
// deltas included, and a router that subscribes late starts from the same state.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HostMirror, layoutOf, type HostEvent } from "../../src/engine/radixgate/host-events.js";
import { StoredStates } from "../../src/scheduler/placement/stored-states.js";
import { CacheFeed, type FeedEvent } from "../../src/serving/cache-feed.js";

function feedOf(inFlight = new Map<string, number>()) {
  return new CacheFeed({ inFlight: () => inFlight, contextSize: () => 64, fingerprint: () => "f" });
}

/** A router's view: the mirror built from the feed's snapshot, then fed every event after it. */
function follow(feed: CacheFeed, model: string) {
  const flat: number[][] = [];
  const loads: number[] = [];
  // What the router's scheduler keeps of the host's stores (the host is one worker to it).
  const stored = new StoredStates();
  let mirror: HostMirror | undefined;
  const unsubscribe = feed.subscribe(model, (event: FeedEvent) => {
    if (event.type === "snapshot") {
      mirror = new HostMirror(layoutOf(event as HostEvent & { type: "snapshot" }), event as HostEvent & { type: "snapshot" });
      mirror.listen({ slotHolds: (slot, tokens) => (flat[slot] = [...tokens]), load: (n) => loads.push(n), storeChanged: (changes) => stored.apply(changes) });
    } else expect(mirror!.apply(event as HostEvent)).toBe(true);
  });
  return { flat, loads, storedIds: () => [...stored.entries()].map(({ id }) => id).sort(), stored, mirror: () => mirror!, unsubscribe };
}

describe("CacheFeed and HostMirror", () => {
  it("send a slot's change as the tokens after what it kept", () => {
    const feed = feedOf();
    feed.addWorker("w0", "m", 2, undefined);
    const events: FeedEvent[] = [];
    feed.subscribe("m", (event) => events.push(event));
    feed.cacheEvent({ type: "slot-holds", workerId: "w0", slot: 1, tokens: [1, 2, 3] });
    feed.cacheEvent({ type: "slot-holds", workerId: "w0", slot: 1, tokens: [1, 2, 3, 4, 5] });
    feed.cacheEvent({ type: "slot-holds", workerId: "w0", slot: 1, tokens: [1, 9] });
    expect(events.slice(1)).toEqual([
      { type: "slot", worker: "w0", slot: 1, keep: 0, append: [1, 2, 3] },
      { type: "slot", worker: "w0", slot: 1, keep: 3, append: [4, 5] },
      { type: "slot", worker: "w0", slot: 1, keep: 1, append: [9] },
    ]);
    feed.close();
  });

  it("lay a host's workers end to end, and a router that joins late sees what one there from the start sees", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant("slot" as const),
              worker: fc.integer({ min: 0, max: 1 }),
              slot: fc.integer({ min: 0, max: 2 }),
              tokens: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 8 }),
            }),
            fc.record({ kind: fc.constant("reset" as const), worker: fc.integer({ min: 0, max: 1 }) }),
          ),
          { maxLength: 40 },
        ),
        fc.integer({ min: 0, max: 40 }),
        (changes, joinAt) => {
          const feed = feedOf();
          feed.addWorker("w0", "m", 2, undefined);
          feed.addWorker("w1", "m", 3, undefined);
          const early = follow(feed, "m");
          let late: ReturnType<typeof follow> | undefined;
          const truth = [[], [], [], [], []] as number[][];
          changes.forEach((change, i) => {
            if (i === joinAt) late = follow(feed, "m");
            const offset = change.worker === 0 ? 0 : 2;
            if (change.kind === "reset") {
              feed.cacheEvent({ type: "worker-reset", workerId: `w${change.worker}` });
              for (let s = 0; s < (change.worker === 0 ? 2 : 3); s++) truth[offset + s] = [];
            } else if (change.worker === 1 || change.slot < 2) {
              feed.cacheEvent({ type: "slot-holds", workerId: `w${change.worker}`, slot: change.slot, tokens: change.tokens });
              truth[offset + change.slot] = change.tokens;
            }
          });
          late ??= follow(feed, "m");
          for (const router of [early, late]) {
            expect(router.mirror().slots).toEqual(truth);
            expect(router.flat).toEqual(truth);
          }
          expect(early.mirror().flatSlot("w1", 0)).toBe(2);
          expect(early.mirror().flatSlot("w1", 3)).toBeUndefined();
          feed.close();
        },
      ),
      { numRuns: 200 },
    );
  });

  it("report a worker's death, and the router forgets its slots", () => {
    const feed = feedOf();
    feed.addWorker("w0", "m", 1, undefined);
    feed.addWorker("w1", "m", 1, undefined);
    feed.cacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: [5, 6] });
    feed.cacheEvent({ type: "slot-holds", workerId: "w1", slot: 0, tokens: [7] });
    const router = follow(feed, "m");
    feed.setAlive("w0", false);
    expect(router.flat).toEqual([[], [7]]);
    // A snapshot taken while it is down shows it down and empty.
    const snapshot = feed.snapshot("m");
    expect(snapshot.workers.map((worker) => [worker.id, worker.alive])).toEqual([
      ["w0", false],
      ["w1", true],
    ]);
    feed.close();
  });

  it("send what the workers' stores keep and drop; a router that joins late has the same; a reset or a death drops a worker's", () => {
    const feed = feedOf();
    feed.addWorker("w0", "m", 1, undefined);
    feed.addWorker("w1", "m", 1, undefined);
    const events: FeedEvent[] = [];
    feed.subscribe("m", (event) => events.push(event));
    const early = follow(feed, "m");
    feed.cacheEvent({
      type: "store-changed",
      workerId: "w0",
      changes: {
        stored: [
          { id: "a", tokens: [1, 2] },
          { id: "b", tokens: [3] },
        ],
        dropped: [],
      },
    });
    feed.cacheEvent({
      type: "store-changed",
      workerId: "w1",
      changes: {
        stored: [
          { id: "c", tokens: [4, 5, 6] },
          { id: "d", tokens: [7] },
        ],
        dropped: [],
      },
    });
    feed.cacheEvent({ type: "store-changed", workerId: "w0", changes: { stored: [], dropped: ["a"] } });
    expect(events.at(-1)).toEqual({ type: "stored", worker: "w0", stored: [], dropped: ["a"] });
    const late = follow(feed, "m");
    for (const router of [early, late]) {
      expect(router.storedIds()).toEqual(["b", "c", "d"]);
      // The router's scheduler finds the host's stored prefix of a prompt.
      expect(router.stored.longestPrefix([4, 5, 6, 9], 0)).toBe(3);
    }
    feed.cacheEvent({ type: "worker-reset", workerId: "w1" });
    expect(events.at(-1)).toEqual({ type: "stored", worker: "w1", stored: [], dropped: ["c", "d"] });
    for (const router of [early, late]) expect(router.storedIds()).toEqual(["b"]);
    // A worker that goes down: the routers drop its states at once.
    feed.setAlive("w0", false);
    for (const router of [early, late]) expect(router.storedIds()).toEqual([]);
    feed.close();
  });

  it("send the loads when they change, summed by the router", async () => {
    const inFlight = new Map([["w0", 0]]);
    const feed = feedOf(inFlight);
    feed.addWorker("w0", "m", 1, undefined);
    const router = follow(feed, "m");
    inFlight.set("w0", 3);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(router.loads.at(-1)).toBe(3);
    expect(router.mirror().inFlight).toBe(3);
    router.unsubscribe();
    expect(feed.subscribers).toBe(0);
    feed.close();
  });

  it("refuse an event for a worker the snapshot did not have (the host changed shape)", () => {
    const feed = feedOf();
    feed.addWorker("w0", "m", 1, undefined);
    const snapshot = feed.snapshot("m") as HostEvent & { type: "snapshot" };
    const mirror = new HostMirror(layoutOf(snapshot), snapshot);
    expect(mirror.apply({ type: "slot", worker: "w9", slot: 0, keep: 0, append: [1] })).toBe(false);
    expect(mirror.apply({ type: "slot", worker: "w0", slot: 1, keep: 0, append: [1] })).toBe(false);
    feed.close();
  });
});
