// bench:live's verdict: each policy against the reference arms of the same run, the median
// over the runs; and the pooled figures of an arm.
import { describe, expect, it } from "vitest";
import { armsOfRun, bothVerdicts, pooledArm, type ArmResult, type RequestSample } from "../../bench/live/live-bench.js";

const sample = (ttftMs: number): RequestSample => ({ ttftMs, totalMs: ttftMs + 100, promptTokens: 100, cachedTokens: 90, worker: "w0" });

/** An arm's result with warm turns of these TTFTs and this burst time. */
function arm(name: string, warm: number[], burstMs: number): ArmResult {
  return {
    arm: name,
    agentWarmTurns: warm.map(sample),
    agentColdTurns: [sample(1000)],
    burstMs,
    burst: [sample(500)],
    trace: [],
    replay: [],
    calibration: { path: "unused", existedBefore: true },
  };
}

describe("bench:live verdict", () => {
  it("compares each run with its own reference arms and takes the median of the ratios", () => {
    // Run 2 ran on a machine twice as slow: the ratios of each run cancel it.
    const runs = [
      [arm("pinned", [100, 110, 120], 5000), arm("spread", [300], 1000), arm("split", [200], 1000), arm("preble", [104, 110, 130], 1030)],
      [arm("pinned", [200, 220, 240], 10000), arm("spread", [600], 2000), arm("split", [460], 2000), arm("preble", [200, 230, 240], 2000)],
      [arm("pinned", [100, 110, 120], 5000), arm("spread", [300], 1000), arm("split", [150], 1000), arm("preble", [150, 165, 180], 1200)],
    ];
    const verdicts = bothVerdicts(runs, ["pinned", "spread", "split", "preble"]);
    expect(verdicts.map((v) => v.arm)).toEqual(["preble"]); // the reference arms are not judged
    const [verdict] = verdicts;
    expect(verdict!.warmVsSplitRuns).toEqual([110 / 200, 0.5, 1.1]);
    expect(verdict!.warmVsSplit).toBeCloseTo(0.55, 10);
    expect(verdict!.arm).toBe("preble");
    expect(verdict!.warmVsPinnedRuns).toEqual([1, 230 / 220, 1.5]);
    expect(verdict!.burstVsSpreadRuns).toEqual([1.03, 1, 1.2]);
    expect(verdict!.warmVsPinned).toBeCloseTo(230 / 220, 10);
    expect(verdict!.burstVsSpread).toBeCloseTo(1.03, 10);
    expect(verdict!.both).toBe(true);
    // Pooled over the runs instead, the slow run's samples would decide: 180 / 120 = 1.5.
    expect(pooledArm(runs, "preble").agentWarmTurns).toHaveLength(9);
  });

  it("fails a policy whose median ratio is beyond the bar, and ignores a run without the reference", () => {
    const runs = [
      [arm("pinned", [100], 5000), arm("spread", [300], 1000), arm("llm-d", [120], 1000)],
      [arm("spread", [300], 1000), arm("llm-d", [100], 1000)],
    ];
    const [verdict] = bothVerdicts(runs, ["pinned", "spread", "llm-d"]);
    expect(verdict!.warmVsPinnedRuns[1]).toBeNaN();
    expect(verdict!.warmVsSplit).toBeNaN(); // no split arm in any run
    expect(verdict!.warmVsPinned).toBeCloseTo(1.2, 10);
    expect(verdict!.burstVsSpread).toBe(1);
    expect(verdict!.both).toBe(false);
  });

  it("pools an arm's samples from every run, its burst time the median of the runs'", () => {
    const runs = [[arm("spread", [1], 900)], [arm("spread", [2, 3], 3000)], [arm("spread", [4], 1000)]];
    const pooled = pooledArm(runs, "spread");
    expect(pooled.agentWarmTurns.map((s) => s.ttftMs)).toEqual([1, 2, 3, 4]);
    expect(pooled.agentColdTurns).toHaveLength(3);
    expect(pooled.burstMs).toBe(1000);
    expect(() => pooledArm(runs, "preble")).toThrow(/no run has arm preble/);
  });

  it("reverses the arms' order every other run", () => {
    expect([0, 1, 2].map((run) => armsOfRun(["pinned", "spread", "preble"], run))).toEqual([
      ["pinned", "spread", "preble"],
      ["preble", "spread", "pinned"],
      ["pinned", "spread", "preble"],
    ]);
  });
});
