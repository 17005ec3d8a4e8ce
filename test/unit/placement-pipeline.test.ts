// The order of GlobalScheduler.place's steps: filters (alive, capacity), then the pinned
// worker, then the session, then the policy. No model, no I/O.
import { describe, expect, it } from "vitest";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { createPolicy } from "../../src/scheduler/registry.js";
import { TimeModel, TIME_MODEL_PRESETS } from "../../src/scheduler/time-model.js";
import type { PlacementRequest } from "../../src/scheduler/types.js";

function setUp(maxQueuePerWorker = 10) {
  const scheduler = new GlobalScheduler(createPolicy("roundrobin"), { now: () => 0, maxQueuePerWorker });
  for (const id of ["w0", "w1"])
    scheduler.addWorker({ id, modelId: "m", slots: 1, capacityTokens: 100_000, timeModel: new TimeModel(TIME_MODEL_PRESETS["a6000-mistral-7b"]!) });
  return scheduler;
}

const request = (seed: number, sessionId?: string): PlacementRequest => ({
  modelId: "m",
  tokens: Array.from({ length: 20 }, (_, i) => 100 * seed + i),
  messageCount: 1,
  ...(sessionId !== undefined ? { sessionId } : {}),
});

describe("placement pipeline", () => {
  it("a pinned worker overrides the session, and is booked for it", () => {
    const scheduler = setUp();
    expect(scheduler.place(request(1, "s"))!.workerId).toBe("w0");
    const pinned = scheduler.place(request(2, "s"), "w1")!;
    expect([pinned.workerId, pinned.placement.reason]).toEqual(["w1", "pinned"]);
    // The session now lives on the pinned worker.
    expect(scheduler.place(request(3, "s"))!.placement).toMatchObject({ workerId: "w1", reason: "session" });
  });

  it("a pinned worker that is down or full gets nothing, even with another worker free", () => {
    const down = setUp();
    down.setAlive("w1", false);
    expect(down.place(request(1), "w1")).toBeUndefined();
    const full = setUp(0);
    full.place(request(1), "w1");
    expect(full.place(request(2), "w1")).toBeUndefined();
    expect(full.place(request(3))!.workerId).toBe("w0");
  });

  it("an overloaded session's worker is left to the policy", () => {
    const scheduler = setUp();
    expect(scheduler.place(request(1, "s"))!.workerId).toBe("w0");
    expect(scheduler.place(request(2, "s"))!.placement.reason).toBe("session");
    // Two in flight on one slot: the default sessionOverloadPerSlot.
    expect(scheduler.place(request(3, "s"))!.placement.reason).toBe("roundrobin");
  });
});
