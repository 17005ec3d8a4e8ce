// The scheduler's state stays bounded under a long run of distinct sessions and prompts:
// sessions by maxSessions (LRU) and the TTL, preble's per-prefix TTFT histories by the tree
// (dropped with their node) and the window, the tree by the workers' capacities, and the
// per-request maps back to empty once every request has completed.
import { describe, expect, it } from "vitest";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import type { PlacementTicket } from "../../src/scheduler/ticket.js";
import { RadixTree } from "../../src/scheduler/radix/tree.js";
import { createPolicy, POLICY_NAMES, type PolicyName } from "../../src/scheduler/registry.js";
import { TIME_MODEL_PRESETS, TimeModel } from "../../src/scheduler/time-model.js";
import type { PlacementRequest } from "../../src/scheduler/types.js";

/** Any realistic time model will do: only the sizes are checked. */
const COEFFICIENTS = TIME_MODEL_PRESETS["a6000-mistral-7b"]!;

const WORKERS = ["w0", "w1", "w2", "w3"];
const SLOTS = 4;
const CAPACITY = 150;
const PREFIX = 32;
const SUFFIX = 16;
/** Requests of one prefix, each CYCLE requests after the one before: more than IN_FLIGHT, so
 *  the one before has ended and its slot, idle, holds the prefix (preble reuses only what an
 *  idle slot holds); its node then lies within the match and preble keeps a TTFT history under it. */
const PER_PREFIX = 5;
const CYCLE = 10;
/** Requests running at once: the oldest completes when one more is placed. */
const IN_FLIGHT = 8;

function makeScheduler(policy: PolicyName, options: { maxSessions?: number; sessionTtlMs?: number; capacityTokens?: number } = {}) {
  const clock = { t: 0 };
  const scheduler = new GlobalScheduler(createPolicy(policy), {
    now: () => clock.t,
    maxQueuePerWorker: 10_000,
    ...(options.maxSessions !== undefined ? { maxSessions: options.maxSessions } : {}),
    ...(options.sessionTtlMs !== undefined ? { sessionTtlMs: options.sessionTtlMs } : {}),
  });
  for (const id of WORKERS) {
    scheduler.addWorker({ id, modelId: "m", slots: SLOTS, capacityTokens: options.capacityTokens ?? CAPACITY, timeModel: new TimeModel(COEFFICIENTS) });
  }
  return { scheduler, clock };
}

/** Request i: its prefix (unless given; CYCLE prefixes take turns, PER_PREFIX requests
 *  each), then a suffix of its own; every token id distinct per part. */
function request(i: number, prefix = Math.floor(i / (PER_PREFIX * CYCLE)) * CYCLE + (i % CYCLE)): PlacementRequest {
  const tokens = new Array<number>(PREFIX + SUFFIX);
  for (let k = 0; k < PREFIX; k++) tokens[k] = 10 + prefix * PREFIX + k;
  for (let k = 0; k < SUFFIX; k++) tokens[PREFIX + k] = 100_000_000 + i * SUFFIX + k;
  return { modelId: "m", tokens, messageCount: 1, sessionId: `s${i}` };
}

/**
 * Drives requests 0..count-1 as the serving layer does: place, the worker's slot
 * report (one request in three fails before it runs: no report, completed not ok), and
 * completion once IN_FLIGHT newer requests are placed; then completes the rest. Returns the
 * largest size of each part seen at the checkpoints (every 1000 requests), checking there
 * what must hold.
 */
function drive(scheduler: GlobalScheduler, clock: { t: number }, count: number): Record<string, number> {
  const peak: Record<string, number> = {};
  const running: { ticket: PlacementTicket; ran: boolean }[] = [];
  const nextSlot = new Map<string, number>();
  const finish = ({ ticket, ran }: { ticket: PlacementTicket; ran: boolean }) => {
    ticket.finished({ ok: ran, promptTokens: ticket.request.tokens.length, cachedTokens: 0, completionTokens: ran ? 8 : 0, ttftMs: 20 });
  };
  for (let i = 0; i < count; i++) {
    clock.t += 1;
    const ticket = scheduler.place(request(i))!;
    const ran = i % 3 !== 0;
    if (ran) {
      const slot = nextSlot.get(ticket.workerId) ?? 0;
      nextSlot.set(ticket.workerId, (slot + 1) % SLOTS);
      ticket.started(slot);
    }
    running.push({ ticket, ran });
    if (running.length > IN_FLIGHT) finish(running.shift()!);
    if (i % 1000 === 999) {
      const sizes = scheduler.stateSizes();
      for (const [name, size] of Object.entries(sizes)) peak[name] = Math.max(peak[name] ?? 0, size);
      // The tree holds what the workers cache (each within its capacity) plus the prompts in flight.
      expect(sizes.treeTokens).toBeLessThanOrEqual(WORKERS.length * CAPACITY + IN_FLIGHT * (PREFIX + SUFFIX));
      expect(sizes.treeNodes).toBeLessThanOrEqual(sizes.treeTokens!);
      // A TTFT history only lives as long as its prefix node.
      expect(sizes["policy.ttftHistories"] ?? 0).toBeLessThanOrEqual(sizes.treeNodes!);
      expect(sizes.inFlight).toBe(IN_FLIGHT);
      expect(sizes.unreported).toBeLessThanOrEqual(IN_FLIGHT);
    }
  }
  for (const ticket of running.splice(0)) finish(ticket);
  return peak;
}

describe("bounded scheduler state", () => {
  it("preble, 100,000 requests of distinct sessions and prompts: every part stays bounded", () => {
    const { scheduler, clock } = makeScheduler("preble", { maxSessions: 1_000 });
    const peak = drive(scheduler, clock, 100_000);
    // The clock moved 100 s, inside the TTL and the window: only the cap and the tree bound these.
    expect(peak.sessions).toBe(1_000);
    // Histories were kept (the run exercises them), far fewer at once than the 20,000
    // prefixes that went through.
    expect(peak["policy.ttftHistories"]).toBeGreaterThan(0);
    expect(peak["policy.ttftHistories"]).toBeLessThan(1_000);
    const end = scheduler.stateSizes();
    expect(end.unreported).toBe(0);
    expect(end.inFlight).toBe(0);
    expect(end.sessions).toBe(1_000);
    expect(end["policy.ttftHistories"]).toBeLessThanOrEqual(end.treeNodes!);
    expect(end.treeTokens).toBeLessThanOrEqual(WORKERS.length * CAPACITY);
  });

  for (const name of POLICY_NAMES.filter((policy) => policy !== "preble")) {
    it(`${name}, 100,000 requests: sessions, tree and per-request maps stay bounded`, () => {
      const { scheduler, clock } = makeScheduler(name, { maxSessions: 500 });
      const peak = drive(scheduler, clock, 100_000);
      expect(peak.sessions).toBe(500);
      const end = scheduler.stateSizes();
      expect(end.unreported).toBe(0);
      expect(end.inFlight).toBe(0);
      expect(end.treeTokens).toBeLessThanOrEqual(WORKERS.length * CAPACITY);
    });
  }
});

describe("sessions: an LRU with a TTL", () => {
  it("evicts the least recently seen session, not the oldest created", () => {
    const { scheduler } = makeScheduler("roundrobin", { maxSessions: 3 });
    const first = scheduler.place({ ...request(0), sessionId: "a" })!.workerId;
    scheduler.place({ ...request(1), sessionId: "b" });
    scheduler.place({ ...request(2), sessionId: "c" });
    // "a" is seen again (pinned), so "b" is now the least recently seen: the fourth session evicts it.
    expect(scheduler.place({ ...request(3), sessionId: "a" })!.placement.reason).toBe("session");
    scheduler.place({ ...request(4), sessionId: "d" });
    expect(scheduler.stateSizes().sessions).toBe(3);
    const again = scheduler.place({ ...request(5), sessionId: "a" })!;
    expect(again.placement.reason).toBe("session");
    expect(again.workerId).toBe(first);
    expect(scheduler.place({ ...request(6), sessionId: "b" })!.placement.reason).not.toBe("session");
  });

  it("forgets sessions idle past the TTL as new ones come in", () => {
    const { scheduler, clock } = makeScheduler("roundrobin", { sessionTtlMs: 1_000 });
    for (let i = 0; i < 50; i++) scheduler.place(request(i));
    expect(scheduler.stateSizes().sessions).toBe(50);
    clock.t += 1_001;
    scheduler.place(request(50));
    expect(scheduler.stateSizes().sessions).toBe(1);
  });
});

describe("preble: TTFT histories", () => {
  it("are dropped once their newest sample is older than the window, even while the node lives", () => {
    // Room for every prompt and no slot reports: the placements' estimates stay, so every
    // prefix node stays in the tree.
    const { scheduler, clock } = makeScheduler("preble", { capacityTokens: 1_000_000 });
    const serve = (from: number, count: number, prefix?: number) => {
      for (let i = from; i < from + count; i++) {
        clock.t += 1;
        const ticket = scheduler.place(request(i, prefix))!;
        ticket.finished({ ok: true, promptTokens: PREFIX + SUFFIX, cachedTokens: 0, completionTokens: 8, ttftMs: 20 });
      }
    };
    serve(0, 500);
    const before = scheduler.stateSizes();
    expect(before["policy.ttftHistories"]).toBe(100); // one per prefix
    clock.t += 180_001;
    // The first prefix again, with new suffixes: its history, the oldest, is sampled anew
    // and kept; the 99 others have nothing left in the window.
    serve(500, PER_PREFIX, 0);
    const after = scheduler.stateSizes();
    expect(after.treeNodes).toBeGreaterThan(before.treeNodes!);
    expect(after["policy.ttftHistories"]).toBe(1);
  });

  it("a history recorded as its request completes goes with the node that completion releases", () => {
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("preble"), { now: () => clock.t });
    // w1 has no room: what is placed on it is only in flight there, never cached.
    for (const [id, capacityTokens] of [
      ["w0", 10_000],
      ["w1", 0],
    ] as const) {
      scheduler.addWorker({ id, modelId: "m", slots: SLOTS, capacityTokens, timeModel: new TimeModel(COEFFICIENTS) });
    }
    const prefix = request(0).tokens.slice(0, PREFIX);
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: prefix });
    for (let i = 1; i <= 3; i++) scheduler.place(request(i, 1_000 + i), "w0"); // w0 is busy
    // The prefix is a quarter of the prompt: explore, to the idle w1, under the prefix's node.
    const long: PlacementRequest = { modelId: "m", tokens: [...prefix, ...request(9, 9).tokens, ...request(10, 10).tokens], messageCount: 1 };
    const ticket = scheduler.place(long)!;
    expect(ticket.workerId).toBe("w1");
    expect(ticket.placement.prefixKey).toBeDefined();
    // w0's slot moves on: the prefix node is left with w1's request alone.
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: request(11, 11).tokens });
    ticket.finished({ ok: true, promptTokens: long.tokens.length, cachedTokens: 0, completionTokens: 8, ttftMs: 20 });
    expect(scheduler.tree("m")!.match(prefix).matchedTokens).toBe(0);
    expect(scheduler.stateSizes()["policy.ttftHistories"]).toBe(0);
  });
});

describe("RadixTree onRemove", () => {
  it("reports the id of every node that leaves the tree, and only those", () => {
    const clock = { t: 0 };
    const removed: number[] = [];
    const tree = new RadixTree({ now: () => clock.t, onRemove: (id) => removed.push(id) });
    tree.insert("w", [1, 2, 3, 4]);
    tree.insert("w", [1, 2, 5, 6]); // splits [1..4] at 2: three nodes
    const ids = tree.match([1, 2, 3, 4]).path.map((node) => node.id);
    const other = tree.match([1, 2, 5, 6]).path[1]!.id;
    expect(tree.nodeCount).toBe(3);
    tree.evict("w", [1, 2, 5]);
    expect(removed).toEqual([other]);
    tree.evict("w", []);
    expect(removed.sort((a, b) => a - b)).toEqual([...ids, other].sort((a, b) => a - b));
    expect(tree.nodeCount).toBe(0);
  });
});
