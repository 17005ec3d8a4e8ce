// The soak's capacity: what counts from a closed loop, and when an open-loop step kept up.
import { describe, expect, it } from "vitest";
import { closedLoopRate, judgeStep } from "../../bench/soak/capacity.js";
import type { RequestRecord } from "../../bench/soak/client.js";
import { DEFAULT_WEIGHTS } from "../../bench/soak/mix.js";

const record = (overrides: Partial<RequestRecord>): RequestRecord => ({
  kind: "stream",
  label: "x",
  sentAtMs: 0,
  totalMs: 100,
  outcome: "completed",
  gotContent: true,
  firstTokenMs: 50,
  ...overrides,
});

describe("closedLoopRate", () => {
  it("counts good requests completed within the second half, scaled to the whole mix", () => {
    const records = [
      record({ sentAtMs: 1_000 }), // first half: not counted
      record({ sentAtMs: 6_000 }),
      record({ sentAtMs: 7_000, kind: "one-shot" }),
      record({ sentAtMs: 8_000, kind: "agent-turn" }),
      record({ sentAtMs: 9_950, totalMs: 100 }), // answered after the window: not counted
      record({ sentAtMs: 6_500, kind: "abort", outcome: "aborted" }),
      record({ sentAtMs: 6_600, kind: "bad", outcome: "refused" }),
      record({ sentAtMs: 7_500, outcome: "failed" }),
    ];
    const { answered, requestsPerS } = closedLoopRate(records, 10);
    expect(answered).toBe(3);
    const goodShare = DEFAULT_WEIGHTS["agent-turn"] + DEFAULT_WEIGHTS["one-shot"] + DEFAULT_WEIGHTS.stream;
    expect(requestsPerS).toBeCloseTo(3 / 5 / goodShare, 9);
  });
});

describe("judgeStep", () => {
  const healthy = Array.from({ length: 100 }, (_, i) => record({ sentAtMs: i * 100, firstTokenMs: 40 + (i % 10) }));

  it("keeps a step where everything completed quickly", () => {
    const step = judgeStep(10, healthy, 10.2, 2000);
    expect(step).toMatchObject({ kept: true, sent: 100, failed: 0, retried: 0, hangs: 0 });
    expect(step.ttftP99Ms).toBe(49);
  });

  it("drops a step whose TTFT p99 grew past the bound (a queue)", () => {
    const queued = healthy.map((r, i) => (i >= 90 ? { ...r, firstTokenMs: 5_000 } : r));
    expect(judgeStep(10, queued, 15, 2000).kept).toBe(false);
  });

  it("drops a step where a good request failed, hung or was turned back with 429", () => {
    expect(judgeStep(10, [...healthy, record({ outcome: "failed", gotContent: false, firstTokenMs: undefined })], 10, 2000)).toMatchObject({
      kept: false,
      failed: 1,
    });
    expect(judgeStep(10, [...healthy, record({ outcome: "hang", firstTokenMs: undefined })], 10, 2000)).toMatchObject({ kept: false, hangs: 1 });
    expect(judgeStep(10, [...healthy, record({ retries: 1 })], 10, 2000)).toMatchObject({ kept: false, retried: 1 });
  });

  it("does not hold the client's own aborts or bad requests against the server", () => {
    const step = judgeStep(
      10,
      [...healthy, record({ kind: "abort", outcome: "aborted" }), record({ kind: "bad", outcome: "refused", firstTokenMs: undefined })],
      10,
      2000,
    );
    expect(step.kept).toBe(true);
  });
});
