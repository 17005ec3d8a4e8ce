// The global scheduler and every policy, driven by synthetic requests: no model, no I/O.
import { describe, expect, it } from "vitest";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { createPolicy, POLICY_NAMES, type PolicyName } from "../../src/scheduler/registry.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import type { PlacementRequest } from "../../src/scheduler/types.js";
import { CPU_LIKE_COEFFICIENTS } from "../helpers/time-models.js";

const COEFFICIENTS = CPU_LIKE_COEFFICIENTS;

interface Harness {
  scheduler: GlobalScheduler;
  clock: { t: number };
  /** Places, reports the slot as a worker would, and completes; returns the worker id. */
  serve(request: PlacementRequest, outcome?: { ttftMs?: number; completionTokens?: number }): string | undefined;
}

function harness(policy: PolicyName, workerIds = ["w0", "w1"], options: { capacityTokens?: number; slots?: number; modelId?: string } = {}): Harness {
  const clock = { t: 0 };
  // Queues unbounded here: back-pressure has its own test below.
  const scheduler = new GlobalScheduler(createPolicy(policy), { now: () => clock.t, maxQueuePerWorker: 10_000 });
  const slots = options.slots ?? 4;
  const nextSlot = new Map<string, number>();
  for (const id of workerIds) {
    scheduler.addWorker({
      id,
      modelId: options.modelId ?? "m",
      slots,
      capacityTokens: options.capacityTokens ?? 1_000_000,
      timeModel: new TimeModel(COEFFICIENTS),
    });
  }
  return {
    scheduler,
    clock,
    serve(request, outcome = {}) {
      const ticket = scheduler.place(request);
      if (!ticket) return undefined;
      const slot = nextSlot.get(ticket.workerId) ?? 0;
      nextSlot.set(ticket.workerId, (slot + 1) % slots);
      ticket.started(slot);
      ticket.finished({
        ok: true,
        promptTokens: request.tokens.length,
        cachedTokens: 0,
        completionTokens: outcome.completionTokens ?? 16,
        ttftMs: outcome.ttftMs ?? 10,
      });
      return ticket.workerId;
    },
  };
}

/** Deterministic pseudo-random tokens: `seed` picks the sequence. */
function tokens(seed: number, length: number, offset = 0): number[] {
  return Array.from({ length }, (_, i) => ((seed * 7919 + (i + offset) * 104729) % 30_000) + 10);
}

const single = (seed: number, length = 60, modelId = "m"): PlacementRequest => ({ modelId, tokens: tokens(seed, length), messageCount: 1 });

/** Turn k of an agent loop: a shared system prompt plus a history that grows every turn. */
function turn(conversation: number, k: number): PlacementRequest {
  const system = tokens(1000 + conversation, 300);
  const history = tokens(2000 + conversation, 40 * k);
  return { modelId: "m", tokens: [...system, ...history], messageCount: 2 * k };
}

describe("conformance: every policy", () => {
  for (const name of POLICY_NAMES) {
    describe(name, () => {
      it("never picks a down worker", () => {
        const { scheduler, serve } = harness(name, ["w0", "w1", "w2"]);
        scheduler.setAlive("w1", false);
        const picks = Array.from({ length: 30 }, (_, i) => serve(i % 3 === 0 ? turn(1, 1 + i) : single(i)));
        expect(picks).not.toContain("w1");
        expect(picks.every((pick) => pick === "w0" || pick === "w2")).toBe(true);
      });

      it("returns nothing when no worker is alive", () => {
        const { scheduler } = harness(name);
        scheduler.setAlive("w0", false);
        scheduler.setAlive("w1", false);
        expect(scheduler.place(single(1))).toBeUndefined();
      });

      it("only ever places a request on a worker of its model", () => {
        const clock = { t: 0 };
        const scheduler = new GlobalScheduler(createPolicy(name), { now: () => clock.t });
        for (const [id, modelId] of [
          ["a0", "a"],
          ["b0", "b"],
          ["a1", "a"],
          ["b1", "b"],
        ] as const) {
          scheduler.addWorker({ id, modelId, slots: 2, capacityTokens: 10_000, timeModel: new TimeModel(COEFFICIENTS) });
        }
        for (let i = 0; i < 20; i++) {
          const model = i % 2 === 0 ? "a" : "b";
          const ticket = scheduler.place(single(i, 50, model))!;
          expect(ticket.workerId.startsWith(model)).toBe(true);
          ticket.finished({ ok: true, promptTokens: 50, cachedTokens: 0, completionTokens: 4, ttftMs: 5 });
        }
        expect(scheduler.place(single(1, 50, "c"))).toBeUndefined();
      });

      it("is deterministic: the same requests give the same picks", () => {
        const run = () => {
          const { serve, clock } = harness(name, ["w0", "w1", "w2"]);
          return Array.from({ length: 40 }, (_, i) => {
            clock.t += 37 * (i % 5);
            return serve(i % 4 === 0 ? turn(i % 3, 1 + (i >> 2)) : single(i * 13, 40 + (i % 7) * 30));
          });
        };
        expect(run()).toEqual(run());
      });
    });
  }
});

describe("a policy's choice", () => {
  it("is refused, loudly, when it names a worker that is not a candidate (one the filters left out)", () => {
    const clock = { t: 0 };
    const rogue = { name: "rogue", place: () => ({ workerId: "w1", reason: "rogue", matchedTokens: 0 }) };
    const scheduler = new GlobalScheduler(rogue, { now: () => clock.t });
    for (const id of ["w0", "w1"]) scheduler.addWorker({ id, modelId: "m", slots: 2, capacityTokens: 10_000, timeModel: new TimeModel(COEFFICIENTS) });
    scheduler.setAlive("w1", false);
    expect(() => scheduler.place(single(1))).toThrow("policy rogue chose w1, which is not a candidate");
    expect(scheduler.views().find((view) => view.id === "w1")!.inFlight).toBe(0);
  });
});

describe("the shape policy's own test", () => {
  for (const name of ["shape", "roundrobin"] as const) {
    it(`${name}: a batch of single-turn requests uses every worker, consecutive picks alternating`, () => {
      const { scheduler } = harness(name, ["w0", "w1"]);
      const tickets = Array.from({ length: 8 }, (_, i) => scheduler.place(single(100 + i))!);
      const picks = tickets.map((ticket) => ticket.workerId);
      expect(new Set(picks)).toEqual(new Set(["w0", "w1"]));
      for (let i = 1; i < picks.length; i++) expect(picks[i]).not.toBe(picks[i - 1]);
    });

    it(`${name}: with a worker down, the batch alternates over the live ones`, () => {
      const { scheduler } = harness(name, ["w0", "w1", "w2"]);
      scheduler.setAlive("w0", false);
      const picks = Array.from({ length: 6 }, (_, i) => scheduler.place(single(200 + i))!.workerId);
      expect(new Set(picks)).toEqual(new Set(["w1", "w2"]));
      for (let i = 1; i < picks.length; i++) expect(picks[i]).not.toBe(picks[i - 1]);
    });
  }

  for (const name of ["shape", "preble", "affinity"] as const) {
    it(`${name}: a growing conversation stays on its first worker for every turn, among other traffic`, () => {
      const { serve } = harness(name, ["w0", "w1"]);
      const first = serve(turn(7, 1))!;
      for (let k = 2; k <= 8; k++) {
        serve(single(300 + k)); // unrelated one-shot traffic in between
        expect(serve(turn(7, k))).toBe(first);
      }
    });

    it(`${name}: with a worker down, the conversation stays on a live worker and moves once when its worker dies`, () => {
      const { scheduler, serve } = harness(name, ["w0", "w1", "w2"]);
      scheduler.setAlive("w2", false);
      const first = serve(turn(9, 1))!;
      expect(first).not.toBe("w2");
      for (let k = 2; k <= 4; k++) expect(serve(turn(9, k))).toBe(first);
      scheduler.setAlive(first, false);
      const second = serve(turn(9, 5))!;
      expect([first, "w2"]).not.toContain(second);
      for (let k = 6; k <= 8; k++) expect(serve(turn(9, k))).toBe(second);
    });
  }
});

describe("a short shared prefix is not a home", () => {
  for (const name of ["shape", "affinity"] as const) {
    it(`${name}: concurrent continuations that share only their first tokens still spread`, () => {
      const { scheduler } = harness(name, ["w0", "w1"]);
      // Every prompt starts with the same 8 "template" tokens, then its own 200; all in flight at once.
      const template = tokens(3, 8);
      const picks = Array.from({ length: 6 }, (_, i) => {
        const request: PlacementRequest = { modelId: "m", tokens: [...template, ...tokens(400 + i, 200)], messageCount: 3 };
        const ticket = scheduler.place(request)!;
        ticket.started(i % 4);
        return ticket.workerId;
      });
      expect(picks.filter((pick) => pick === "w0")).toHaveLength(3);
    });
  }
});

describe("preble: E2", () => {
  it("exploits when the matched prefix is longer than the remainder, even on the busier worker", () => {
    const { scheduler, serve } = harness("preble", ["w0", "w1"]);
    const prefix = tokens(1, 1000);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    // Make the holder busier than the other worker: two requests still in flight there.
    for (let i = 0; i < 2; i++) scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(50 + i, 20)], messageCount: 1 });
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(99, 100)], messageCount: 1 })!;
    expect(ticket.placement.reason).toBe("exploit");
    expect(ticket.placement.matchedTokens).toBe(1000);
    expect(ticket.workerId).toBe(holder);
    // The only holder has nothing to be priced against: its eviction cost is not walked.
    expect(ticket.placement.costs).toEqual({});
  });

  it("explores when the remainder is longer, picking the minimum-cost worker", () => {
    const { scheduler } = harness("preble", ["w0", "w1", "w2"]);
    // Load w0 and w1 with requests in flight; w2 is idle and cheapest.
    for (let i = 0; i < 3; i++) scheduler.place({ ...single(i, 200) }, "w0");
    scheduler.place(single(9, 200), "w1");
    const ticket = scheduler.place(single(42, 300))!;
    expect(ticket.placement.reason).toBe("explore");
    const costs = ticket.placement.costs!;
    expect(ticket.workerId).toBe("w2");
    // Workers whose load + prefill alone could not beat w2 are not priced further.
    expect(Object.keys(costs)).toContain("w2");
    for (const cost of Object.values(costs)) expect(costs.w2).toBeLessThanOrEqual(cost);
  });

  it("explores, not exploits, when a cached prefix covers less than the remainder", () => {
    const { scheduler, serve } = harness("preble", ["w0", "w1"]);
    const prefix = tokens(2, 100);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    for (let i = 0; i < 3; i++) scheduler.place(single(60 + i, 300), holder); // the holder is busy
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(77, 400)], messageCount: 1 })!;
    expect(ticket.placement.matchedTokens).toBe(100);
    expect(ticket.placement.reason).toBe("explore");
    expect(ticket.workerId).not.toBe(holder);
  });

  it("keeps an exploit on its holder however much more work the window put there, while its first token comes soonest there", () => {
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("preble"), { now: () => clock.t });
    for (const id of ["w0", "w1"]) scheduler.addWorker({ id, modelId: "m", slots: 4, capacityTokens: 1e6, timeModel: new TimeModel(COEFFICIENTS) });
    const prefix = tokens(3, 500);
    const first = scheduler.place({ modelId: "m", tokens: prefix, messageCount: 1 }, "w0")!;
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: prefix });
    first.finished({ ok: true, promptTokens: 500, cachedTokens: 0, completionTokens: 10, ttftMs: 50 });
    // Lots of prefill work lands on w0 in the window (pinned placements of other prompts),
    // all of it done: w0's load over the window is far above w1's, its queue empty. (Preble
    // would rebalance this continuation to w1 and recompute its 500 cached tokens there.)
    for (let i = 0; i < 120; i++) {
      const other = scheduler.place(single(700 + i, 400), "w0")!;
      other.started(1);
      other.finished({ ok: true, promptTokens: 400, cachedTokens: 0, completionTokens: 10, ttftMs: 50 });
    }
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(5, 50)], messageCount: 2 })!;
    expect(ticket.placement.reason).toBe("exploit");
    expect(ticket.workerId).toBe("w0");
  });

  it("prices the prefill a worker is still evaluating: a cold request avoids a worker busy with a long prompt's prefill", () => {
    const { scheduler } = harness("preble", ["w0", "w1"]);
    // The same prefill work in both workers' windows: w1's is done, w0's has a slot but no first token yet.
    const done = scheduler.place(single(31, 3000), "w1")!;
    done.started(0);
    done.firstToken();
    const evaluating = scheduler.place(single(32, 3000), "w0")!;
    evaluating.started(0);
    const cold = scheduler.place(single(33, 200))!;
    expect(cold.placement.reason).toBe("explore");
    expect(cold.workerId).toBe("w1");
    // Its first token came: the two workers price alike again, and the first in the list wins.
    evaluating.firstToken();
    cold.finished({ ok: true, promptTokens: 200, cachedTokens: 0, completionTokens: 16, ttftMs: 10 });
    expect(scheduler.place(single(34, 200))!.workerId).toBe("w0");
  });

  it("prices for a request only the pending prefill a worker would evaluate before it: a cached prefix jumps its holder's cold prefills", () => {
    const { scheduler, serve } = harness("preble", ["w0", "w1"]);
    const prefix = tokens(41, 600);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    const other = holder === "w0" ? "w1" : "w0";
    // Three long cold prompts pending on the holder (its other slots are evaluating them).
    for (let i = 0; i < 3; i++) scheduler.place(single(50 + i, 2000), holder)!.started(i + 1);
    // The prefix's next request ranks above them there (its hit ratio): nothing is ahead of it, it exploits.
    const warm = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(60, 40)], messageCount: 1 })!;
    expect(warm.placement.reason).toBe("exploit");
    expect(warm.workerId).toBe(holder);
    // A cold request ranks below them: all of it is ahead on the holder, so it goes to the other worker.
    expect(scheduler.place(single(61, 200))!.workerId).toBe(other);
  });

  it("yields an exploit to another worker when the holder's queue would give the first token later", () => {
    const { scheduler, serve } = harness("preble", ["w0", "w1"], { slots: 2 });
    const prefix = tokens(21, 600);
    const request = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...prefix, ...tokens(800 + i, 40)], messageCount: 1 });
    // Answers of 400 tokens: a slot turns over every 400 x 5 ms, a prefix of 600 is recomputed in 600 ms.
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 }, { completionTokens: 400 })!;
    const other = holder === "w0" ? "w1" : "w0";
    // While the holder has a free slot, the prefix keeps its requests there.
    const running = [scheduler.place(request(0))!, scheduler.place(request(1))!];
    for (const ticket of running) {
      expect(ticket.workerId).toBe(holder);
      expect(ticket.placement.reason).toBe("exploit");
    }
    // Both its slots taken and requests queued behind them: each more one waits a slot's
    // turnover, longer than recomputing the prefix on the idle worker.
    const queued = [scheduler.place(request(2))!, scheduler.place(request(3))!, scheduler.place(request(4))!];
    const moved = queued.filter((ticket) => ticket.workerId === other);
    expect(moved.length).toBeGreaterThan(0);
    expect(moved[0]!.placement.reason).toBe("yield");
    // Once the worker it yielded to holds the prefix too, its requests are exploits there.
    const next = scheduler.place(request(5))!;
    expect(next.placement.matchedTokens).toBeGreaterThanOrEqual(600);
  });

  it("keeps an exploit on its holder when the time a yield saves it is less than its recomputed prefix costs the requests running on the other worker", () => {
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("preble"), { now: () => clock.t, maxQueuePerWorker: 10_000 });
    for (const id of ["w0", "w1"]) scheduler.addWorker({ id, modelId: "m", slots: 4, capacityTokens: 1e6, timeModel: new TimeModel(COEFFICIENTS) });
    const done = { ok: true, promptTokens: 100, cachedTokens: 0, completionTokens: 400, ttftMs: 50 } as const;
    // w0 holds a 600-token prefix in its idle slot 0. Answers are 400 tokens: a slot turns over every 2000 ms.
    const prefix = tokens(23, 600);
    const first = scheduler.place({ modelId: "m", tokens: prefix, messageCount: 1 }, "w0")!;
    first.started(0);
    first.finished({ ...done, promptTokens: 600 });
    // Decoding requests on each worker: five on w0 (three in its other slots, two waiting for
    // one), three on w1 (one of its slots free).
    const running = (workerId: string, count: number, firstSlot: number) =>
      Array.from({ length: count }, (_, i) => {
        const ticket = scheduler.place(single(300 + 10 * firstSlot + i + (workerId === "w0" ? 0 : 100), 100), workerId)!;
        if (firstSlot + i < 4) {
          ticket.started(firstSlot + i);
          ticket.firstToken();
        }
        return ticket;
      });
    running("w0", 5, 1);
    const onOther = running("w1", 3, 0);
    const question = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...prefix, ...tokens(900 + i, 40)], messageCount: 1 });
    // On w0 the question waits two slot turnovers (1000 ms) and computes 40 tokens; on w1 it
    // would start at once and compute all 640 of them, sooner by 400 ms, but its three running
    // requests would each wait out that prefill (1923 ms together, against 205 ms for the five on w0): it
    // stays on w0.
    const stays = scheduler.place(question(0))!;
    expect(stays.placement.reason).toBe("exploit");
    expect(stays.workerId).toBe("w0");
    // Once w1's requests are done, recomputing the prefix there costs no one else: it yields.
    for (const ticket of onOther) ticket.finished(done);
    const moves = scheduler.place(question(1))!;
    expect(moves.placement.reason).toBe("yield");
    expect(moves.workerId).toBe("w1");
  });

  it("counts the load of a stored state in what a yield costs the requests running where it goes", () => {
    // Copies of 1 ms per token: a state of 300 tokens loads in 150.5 ms (half a copy).
    const slowCopies = new TimeModel({ ...COEFFICIENTS, copyBase: 1, copyPerToken: 1 });
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("preble"), { now: () => clock.t, maxQueuePerWorker: 10_000 });
    for (const id of ["w0", "w1"]) scheduler.addWorker({ id, modelId: "m", slots: 4, capacityTokens: 1e6, timeModel: slowCopies });
    const done = { ok: true, promptTokens: 100, cachedTokens: 0, completionTokens: 400, ttftMs: 50 } as const;
    // w0 holds a 600-token prefix in its idle slot 0 and runs five requests (two wait for a slot):
    // the question's first token comes in 1041 ms there, and its 41 ms prefill holds those five.
    const prefix = tokens(29, 600);
    const first = scheduler.place({ modelId: "m", tokens: prefix, messageCount: 1 }, "w0")!;
    first.started(0);
    first.finished({ ...done, promptTokens: 600 });
    for (let i = 0; i < 5; i++) {
      const ticket = scheduler.place(single(500 + i, 100), "w0")!;
      if (i < 3) {
        ticket.started(i + 1);
        ticket.firstToken();
      }
    }
    // w1 keeps the prefix's first 300 tokens in its state store and runs two requests, a slot free.
    scheduler.applyCacheEvent({ type: "store-changed", workerId: "w1", changes: { stored: [{ id: "half", tokens: prefix.slice(0, 300) }], dropped: [] } });
    const onOther = [0, 1].map((i) => {
      const ticket = scheduler.place(single(600 + i, 100), "w1")!;
      ticket.started(i);
      ticket.firstToken();
      return ticket;
    });
    // On w1 the question loads the state (150.5 ms) and computes 340 tokens (341 ms): its first
    // token 549.5 ms sooner. Both hold w1's two running requests: 983 ms, more than the time
    // saved once w0's 205 ms is counted (1246 against 1474.5). Its computing alone (682 ms) would
    // not be (1173.5): the load is what keeps the question on w0.
    const question = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...prefix, ...tokens(950 + i, 40)], messageCount: 1 });
    const stays = scheduler.place(question(0))!;
    expect(stays.placement.reason).toBe("exploit");
    expect(stays.workerId).toBe("w0");
    // With one of w1's requests done (and the first question queued on w0 too), the yield saves
    // the question more than it costs the request left on w1.
    onOther[0]!.finished(done);
    const moves = scheduler.place(question(1))!;
    expect(moves.placement.reason).toBe("yield");
    expect(moves.workerId).toBe("w1");
  });

  it("counts a prefix as cached only where an idle slot holds it: one a running request's slot holds is recomputed, so the request explores", () => {
    const { scheduler } = harness("preble", ["w0", "w1"]);
    const doc = tokens(71, 2000);
    const question = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...doc, ...tokens(900 + i, 30)], messageCount: 1 });
    // The first question about the document runs on w0, in slot 0: that slot holds the
    // document (the tree says w0 caches it), but the slot is taken until the answer ends.
    const first = scheduler.place(question(0), "w0")!;
    first.started(0);
    first.firstToken();
    // A second question now would get another slot of w0 and compute the document again:
    // nothing on either worker is reusable, so it explores and goes to the idle worker.
    const second = scheduler.place(question(1))!;
    expect(second.placement.reason).toBe("explore");
    expect(second.placement.matchedTokens).toBe(0);
    expect(second.workerId).toBe("w1");
    second.finished({ ok: true, promptTokens: 2030, cachedTokens: 0, completionTokens: 16, ttftMs: 10 });
    first.finished({ ok: true, promptTokens: 2030, cachedTokens: 0, completionTokens: 16, ttftMs: 10 });
    // The answer ended: w0's slot 0 is idle and keeps the document, and so does w1's: the
    // next question exploits (the first holder in the list, its costs level).
    const third = scheduler.place(question(2))!;
    expect(third.placement.reason).toBe("exploit");
    expect(third.placement.matchedTokens).toBe(2000);
  });

  it("replicates a hot prefix: the next request goes to a second worker with a copy action", () => {
    const { scheduler, clock, serve } = harness("preble", ["w0", "w1"]);
    const prefix = tokens(11, 800);
    const request = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...prefix, ...tokens(500 + i, 30)], messageCount: 1 });
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    // First half of the window: fast first tokens. Second half: three times slower.
    for (let i = 0; i < 3; i++) expect(serve(request(i), { ttftMs: 100 })).toBe(holder);
    clock.t += 100_000;
    for (let i = 3; i < 6; i++) expect(serve(request(i), { ttftMs: 300 })).toBe(holder);
    const ticket = scheduler.place(request(99))!;
    expect(ticket.placement.reason).toBe("replicate");
    expect(ticket.workerId).not.toBe(holder);
    expect(ticket.placement.copies).toHaveLength(1);
    const copy = ticket.placement.copies![0]!;
    expect(copy).toMatchObject({ modelId: "m", fromWorkerId: holder, toWorkerId: ticket.workerId });
    expect(copy.tokens).toEqual(prefix);
    expect(copy.copyMs).toBeLessThan(copy.recomputeMs);
  });

  it("does not call a prefix hot while its TTFT holds steady", () => {
    const { scheduler, clock, serve } = harness("preble", ["w0", "w1"]);
    const prefix = tokens(12, 800);
    const request = (i: number): PlacementRequest => ({ modelId: "m", tokens: [...prefix, ...tokens(600 + i, 30)], messageCount: 1 });
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    for (let i = 0; i < 3; i++) serve(request(i), { ttftMs: 100 });
    clock.t += 100_000;
    for (let i = 3; i < 6; i++) serve(request(i), { ttftMs: 150 });
    const ticket = scheduler.place(request(99))!;
    expect(ticket.placement.reason).toBe("exploit");
    expect(ticket.workerId).toBe(holder);
  });
});

describe("the tree's view of each worker", () => {
  it("never exceeds a worker's KV budget, whatever is placed", () => {
    const { scheduler, serve } = harness("preble", ["w0", "w1"], { capacityTokens: 1000, slots: 2 });
    for (let i = 0; i < 60; i++) {
      serve(i % 3 === 0 ? turn(i % 4, 1 + (i % 5)) : single(i, 100 + ((i * 37) % 300)));
      for (const view of scheduler.views()) expect(view.kvTokens).toBeLessThanOrEqual(1000);
    }
  });

  it("follows the workers' slot reports exactly: replaced content is no longer matched", () => {
    const { scheduler } = harness("affinity", ["w0"]);
    const a = tokens(21, 100);
    const b = tokens(22, 100);
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: a });
    expect(scheduler.tree("m")!.match(a).perWorker.get("w0")).toBe(100);
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: b });
    expect(scheduler.tree("m")!.match(a).perWorker.get("w0") ?? 0).toBe(0);
    expect(scheduler.tree("m")!.match(b).perWorker.get("w0")).toBe(100);
  });

  it("keeps a prefix that another slot still holds when one slot moves on", () => {
    const { scheduler } = harness("affinity", ["w0"]);
    const shared = tokens(31, 80);
    const first = [...shared, ...tokens(32, 20)];
    const second = [...shared, ...tokens(33, 20)];
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: first });
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 1, tokens: second });
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: tokens(34, 50) });
    expect(scheduler.tree("m")!.match(second).perWorker.get("w0")).toBe(100);
    expect(scheduler.tree("m")!.match(first).perWorker.get("w0")).toBe(80);
  });

  it("a slot report does not refresh the LRU times of what other slots hold", () => {
    const { scheduler, clock } = harness("affinity", ["w0"]);
    const tree = scheduler.tree("m")!;
    const shared = tokens(51, 80);
    const first = [...shared, ...tokens(52, 20)];
    const second = [...shared, ...tokens(53, 20)];
    const other = tokens(55, 30);
    clock.t = 1;
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: first });
    clock.t = 2;
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 1, tokens: second });
    clock.t = 3;
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 2, tokens: other });
    clock.t = 10;
    // Slot 0 leaves the shared prefix for another prompt: slot 1 keeps its content, untouched.
    scheduler.applyCacheEvent({ type: "slot-holds", workerId: "w0", slot: 0, tokens: tokens(54, 50) });
    expect(tree.match(second).perWorker.get("w0")).toBe(100);
    expect(tree.match(second).path.map((node) => node.lastAccess("w0"))).toEqual([2, 2]);
    expect(tree.match(other).path[0]!.lastAccess("w0")).toBe(3);
    // So LRU still takes slot 1's suffix (last used at 2) before slot 2's prompt (3).
    const order = tree.simulateEviction("w0", tree.capacity("w0")).map((entry) => entry.contextLength);
    expect(order.slice(0, 3)).toEqual([100, 80, 30]);
  });

  it("forgets a dead worker's cache", () => {
    const { scheduler, serve } = harness("affinity", ["w0", "w1"]);
    const worker = serve(single(5, 200))!;
    scheduler.setAlive(worker, false);
    expect(scheduler.views().find((view) => view.id === worker)?.kvTokens).toBe(0);
  });
});

describe("session pinning", () => {
  it("sticks a session to its worker under any policy, until the worker goes down", () => {
    const { scheduler, serve } = harness("roundrobin", ["w0", "w1"]);
    const first = serve({ ...single(1), sessionId: "s1" })!;
    for (let i = 2; i < 6; i++) expect(serve({ ...single(i), sessionId: "s1" })).toBe(first);
    scheduler.setAlive(first, false);
    const moved = serve({ ...single(9), sessionId: "s1" })!;
    expect(moved).not.toBe(first);
    expect(serve({ ...single(10), sessionId: "s1" })).toBe(moved);
  });

  it("leaves an overloaded worker", () => {
    const { scheduler } = harness("least-load", ["w0", "w1"], { slots: 1 });
    const first = scheduler.place({ ...single(1), sessionId: "s2" })!;
    scheduler.place({ ...single(2), sessionId: "s2" }); // in flight on the same worker: 2 per slot now
    const third = scheduler.place({ ...single(3), sessionId: "s2" })!;
    expect(third.placement.reason).not.toBe("session");
    expect(third.workerId).not.toBe(first.workerId);
  });
});

describe("cache-aware (SGLang's rule)", () => {
  it("goes to the longest match when it covers more than 30% of the input", () => {
    const { scheduler, serve } = harness("cache-aware", ["w0", "w1"]);
    const prefix = tokens(41, 100);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(42, 150)], messageCount: 1 })!;
    expect(ticket.placement.reason).toBe("cache-hit");
    expect(ticket.workerId).toBe(holder);
  });

  it("goes to the least loaded worker when the match is short", () => {
    const { scheduler, serve } = harness("cache-aware", ["w0", "w1"]);
    const prefix = tokens(43, 50);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    scheduler.place(single(44), holder); // the holder now has one in flight
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(45, 200)], messageCount: 1 })!;
    expect(ticket.placement.reason).toBe("least-load");
    expect(ticket.workerId).not.toBe(holder);
  });

  it("balances by queue when loads differ by more than 64 and 1.5x, whatever the match", () => {
    const { scheduler, serve } = harness("cache-aware", ["w0", "w1"]);
    const prefix = tokens(46, 100);
    const holder = serve({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    for (let i = 0; i < 70; i++) scheduler.place(single(1000 + i), holder);
    const ticket = scheduler.place({ modelId: "m", tokens: [...prefix, ...tokens(47, 10)], messageCount: 1 })!;
    expect(ticket.placement.reason).toBe("imbalanced");
    expect(ticket.workerId).not.toBe(holder);
  });
});

describe("back-pressure", () => {
  it("never places on a worker whose queue is full, and says when all are", () => {
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("least-load"), { now: () => clock.t, maxQueuePerWorker: 1 });
    for (const id of ["w0", "w1"]) scheduler.addWorker({ id, modelId: "m", slots: 1, capacityTokens: 1e6, timeModel: new TimeModel(COEFFICIENTS) });
    const placed = Array.from({ length: 4 }, (_, i) => scheduler.place(single(i))!.workerId);
    expect(placed.sort()).toEqual(["w0", "w0", "w1", "w1"]); // 1 running + 1 waiting each
    expect(scheduler.allQueuesFull("m")).toBe(true);
    expect(scheduler.place(single(9))).toBeUndefined();
    // A worker down (restarting): the live one takes its two places, then is full again.
    scheduler.setAlive("w1", false);
    expect(scheduler.allQueuesFull("m")).toBe(false);
    expect([scheduler.place(single(10))!.workerId, scheduler.place(single(11))!.workerId]).toEqual(["w0", "w0"]);
    expect(scheduler.allQueuesFull("m")).toBe(true);
    expect(scheduler.place(single(12))).toBeUndefined();
    // Back up: each has its own places only again (w1's two requests were never completed here).
    scheduler.setAlive("w1", true);
    expect(scheduler.allQueuesFull("m")).toBe(true);
  });
});

describe("RecentMedian", () => {
  it("is the median of the last values only", async () => {
    const { RecentMedian } = await import("../../src/scheduler/windowed-sum.js");
    const median = new RecentMedian(5);
    expect(median.median()).toBeUndefined();
    for (const value of [9, 1, 5]) median.push(value);
    expect(median.median()).toBe(5);
    for (const value of [100, 100, 100, 100]) median.push(value); // 9, 1, 5 and one 100 roll out
    expect(median.median()).toBe(100);
    for (const value of [2, 3, 4]) median.push(value); // last five: 100, 100, 2, 3, 4
    expect(median.median()).toBe(4);
  });

  it("keeps the median of a plain sort of the window, value after value (repeats, both directions)", async () => {
    const { RecentMedian } = await import("../../src/scheduler/windowed-sum.js");
    const { mulberry32 } = await import("../../src/common/random.js");
    const random = mulberry32(11);
    const median = new RecentMedian(7);
    const window: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const value = Math.floor(random() * 12) * (i % 3 === 0 ? 10 : 1);
      median.push(value);
      window.push(value);
      if (window.length > 7) window.shift();
      const sorted = [...window].sort((a, b) => a - b);
      expect(median.median()).toBe(sorted[Math.floor(sorted.length / 2)]);
    }
  });
});

describe("load reported by a worker that other routers share, and a worker held out", () => {
  it("counts the requests beyond this scheduler's own as load: least-load goes elsewhere, and a full queue refuses", () => {
    const { scheduler } = harness("least-load", ["w0", "w1"], { slots: 1 });
    // w0 reports 5 requests of other routers; this scheduler has none anywhere.
    scheduler.reportLoad("w0", 5);
    expect(scheduler.views().find((view) => view.id === "w0")!.inFlight).toBe(5);
    expect(scheduler.place(single(1))!.workerId).toBe("w1");
    // Its own requests are not counted twice: a report of what it placed itself adds nothing.
    scheduler.reportLoad("w1", 1);
    expect(scheduler.views().find((view) => view.id === "w1")!.inFlight).toBe(1);
    // Beyond its slots and queue, a worker takes nothing more, whoever filled it.
    const tight = new GlobalScheduler(createPolicy("least-load"), { now: () => 0, maxQueuePerWorker: 2 });
    tight.addWorker({ id: "w0", modelId: "m", slots: 1, capacityTokens: 1_000_000, timeModel: new TimeModel(COEFFICIENTS) });
    tight.reportLoad("w0", 3);
    expect(tight.place(single(2))).toBeUndefined();
    expect(tight.allQueuesFull("m")).toBe(true);
  });

  it("never places on a held worker and keeps its cache in the tree", () => {
    const { scheduler, serve } = harness("preble");
    const prompt = single(7, 200);
    const holder = serve(prompt)!;
    scheduler.setHeld(holder, true);
    const other = holder === "w0" ? "w1" : "w0";
    for (let i = 0; i < 3; i++) expect(scheduler.place({ ...prompt, tokens: [...prompt.tokens, 1, 2, i] })!.workerId).toBe(other);
    expect(scheduler.tree("m")!.cachedTokens(holder)).toBeGreaterThanOrEqual(200);
    scheduler.setHeld(holder, false);
    expect(scheduler.place({ ...prompt, tokens: [...prompt.tokens, 9] })!.workerId).toBe(holder);
  });
});

describe("placing again after an engine stayed silent, and a session another router placed", () => {
  it("never places on a worker the request avoids, even the one holding its prefix", () => {
    const { scheduler, serve } = harness("preble");
    const prompt = single(8, 200);
    const holder = serve(prompt)!;
    const other = holder === "w0" ? "w1" : "w0";
    const next = { ...prompt, tokens: [...prompt.tokens, 4, 5] };
    expect(scheduler.place({ ...next, avoidWorkerIds: [holder] })!.workerId).toBe(other);
    // Avoiding every worker leaves no place.
    expect(scheduler.place({ ...next, avoidWorkerIds: ["w0", "w1"] })).toBeUndefined();
  });

  it("sends a session's request to the worker another router served it on, as the shared store says", () => {
    const { scheduler } = harness("roundrobin");
    const request = { ...single(9), sessionId: "s-1" };
    // Alone, roundrobin would start at w0.
    scheduler.rememberSession("s-1", "w1");
    expect(scheduler.place(request)).toMatchObject({ workerId: "w1", placement: { reason: "session" } });
    // A worker this scheduler does not have is ignored.
    scheduler.rememberSession("s-2", "w9");
    expect(scheduler.place({ ...single(10), sessionId: "s-2" })!.placement.reason).toBe("roundrobin");
  });
});
