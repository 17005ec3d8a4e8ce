// What bench:sim-vs-live's prediction takes from its probes: the host's contention from "two
// workers busy", and the served cost of a decode pass of several sequences from "four decode
// together", both as live over the card without contention; and the card that carries them.
import { describe, expect, it } from "vitest";
import { contentionOf, type ProbeResult, type SideSummary, specOfLive } from "../../bench/live/compare.js";
import { CPU_MULTI_SEQUENCE_PASS, kvBytesPerToken } from "../../bench/sim/hardware.js";
import { liveConfig } from "../../bench/live/live-bench.js";
import { defaultStateDir } from "../../src/engine/worker/state-store.js";
import { PRESETS } from "../../src/presets/make-model.js";
import { fitSpillBudget, folderBytes } from "../../src/serving/spill-budget.js";
import { CPU_LIKE_COEFFICIENTS } from "../helpers/time-models.js";

const side = (ttftMs: number, latencyMs: number): SideSummary => {
  const at = (mean: number) => ({ mean, p50: mean, p90: mean, p99: mean, max: mean });
  return { n: 2, ttftMs: at(ttftMs), latencyMs: at(latencyMs), cachedFraction: 0, placed: {} };
};

function probe(name: string, live: SideSummary, alone: SideSummary, workers = 1, requests = 2): ProbeResult {
  return { name, isolates: "", workers, requests, live, variants: { "gpu-style": alone, store: alone, "cpu-alone": alone, cpu: alone } };
}

describe("the factors bench:sim-vs-live's prediction takes from its probes", () => {
  const busy = probe("two workers busy", side(1100, 2600), side(1000, 2000), 2, 2);

  it("contention from two workers busy: prefill and decode, live over the card alone", () => {
    const factors = contentionOf([busy])!;
    expect(factors.prefillFactor).toBeCloseTo(1.1, 10);
    expect(factors.decodeFactor).toBeCloseTo(1.5, 10);
    // Without the four-sequence probe the card keeps its own pass factor.
    expect(factors.multiSequencePass).toBeUndefined();
  });

  it("the pass of several sequences from four decode together: the card's factor times live decode over the card's", () => {
    const four = probe("four decode together", side(400, 3400), side(500, 2500));
    expect(contentionOf([busy, four])!.multiSequencePass).toBeCloseTo((CPU_MULTI_SEQUENCE_PASS * 3000) / 2000, 10);
  });

  it("contention from two requests on each worker when that probe ran, its decode net of the measured pass", () => {
    const four = probe("four decode together", side(400, 3400), side(500, 2500));
    const twoEach = probe("two workers, two each", side(1300, 4300), side(1000, 2500), 2, 4);
    const factors = contentionOf([busy, four, twoEach])!;
    expect(factors.prefillFactor).toBeCloseTo(1.3, 10);
    // Pass measured at 1.5x the card's: of the live decode's 3000 ms against 1500, 2250 is the pass.
    expect(factors.decodeFactor).toBeCloseTo(3000 / (1500 * 1.5), 10);
    // Without the pass measured, the whole ratio is contention.
    expect(contentionOf([busy, twoEach])!.decodeFactor).toBeCloseTo(2, 10);
  });

  it("is carried by the prediction's card only", () => {
    const options = { preset: "bench" as const, workers: 2, threads: 1 };
    const measured = { prefillFactor: 1.1, decodeFactor: 1.5, multiSequencePass: 2.4 };
    const prediction = specOfLive(options, CPU_LIKE_COEFFICIENTS, "cpu", measured);
    expect(prediction.multiSequencePassFactor).toBe(2.4);
    expect(prediction.contention).toEqual({ prefillFactor: 1.1, decodeFactor: 1.5 });
    const alone = specOfLive(options, CPU_LIKE_COEFFICIENTS, "cpu-alone", measured);
    expect(alone.multiSequencePassFactor).toBe(CPU_MULTI_SEQUENCE_PASS);
    expect(alone.contention).toBeUndefined();
  });

  it("gives the simulated store the budget the live server's workers get: fitted to the state folder", () => {
    const options = { preset: "bench" as const, workers: 2, threads: 1 };
    const spec = specOfLive(options, CPU_LIKE_COEFFICIENTS, "cpu");
    const perToken = kvBytesPerToken(PRESETS.bench);
    const fitted = fitSpillBudget(liveConfig(options, "roundrobin").spill.budgetBytes, 2, folderBytes(defaultStateDir()));
    expect(spec.spill?.budgetTokens).toBe(Math.floor(fitted / perToken));
  });
});
