import { describe, expect, it } from "vitest";
import { createPolicy, POLICY_NAMES } from "../../src/scheduler/registry.js";
import type { PlacementRequest, WorkerView } from "../../src/scheduler/types.js";

const workers = (ids: string[], modelId = "m"): WorkerView[] => ids.map((id) => ({ id, modelId, alive: true, inFlight: 0 }));
const request = (modelId = "m"): PlacementRequest => ({ modelId, tokens: [1, 2, 3], messageCount: 1 });

describe("policy registry", () => {
  it("creates every registered policy by name", () => {
    for (const name of POLICY_NAMES) expect(createPolicy(name).name).toBe(name);
  });

  it("refuses an unknown name and lists the known ones", () => {
    expect(() => createPolicy("random")).toThrow(/unknown scheduler.policy "random"; available: roundrobin/);
  });
});

describe("roundrobin", () => {
  it("alternates over the candidates", () => {
    const policy = createPolicy("roundrobin");
    const picks = Array.from({ length: 5 }, () => policy.place(request(), workers(["w0", "w1"]))?.workerId);
    expect(picks).toEqual(["w0", "w1", "w0", "w1", "w0"]);
  });

  it("keeps a separate counter per model", () => {
    const policy = createPolicy("roundrobin");
    expect(policy.place(request("a"), workers(["a0", "a1"], "a"))?.workerId).toBe("a0");
    expect(policy.place(request("b"), workers(["b0", "b1"], "b"))?.workerId).toBe("b0");
    expect(policy.place(request("a"), workers(["a0", "a1"], "a"))?.workerId).toBe("a1");
  });

  it("returns nothing when no worker is alive", () => {
    expect(createPolicy("roundrobin").place(request(), [])).toBeUndefined();
  });
});
