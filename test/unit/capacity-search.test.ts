// The simulator's capacity search: bracketing, then at least 8 bisection steps, on a fleet
// whose p99 TTFT is a known function of the load.
import { describe, expect, it } from "vitest";
import { CAPACITY_DEFAULTS, findCapacity } from "../../bench/sim/capacity.js";

/** p99 TTFT that stays flat below the knee and grows fast past it, as queueing does. */
const fleet = (knee: number) => async (load: number) => ({ ttftP99Ms: load <= knee ? 100 : 100 + (load - knee) * 10_000, refused: 0 });

describe("findCapacity", () => {
  for (const knee of [0.01, 0.3, 0.77, 5]) {
    it(`finds a knee at load ${knee} from below, to within the bracket / 2^8`, async () => {
      const result = await findCapacity(fleet(knee), { ...CAPACITY_DEFAULTS, sloTtftP99Ms: 150 });
      const threshold = knee + 50 / 10_000;
      expect(result.load).toBeLessThanOrEqual(threshold);
      // The bracket a doubling found is at most 2x wide: 8 halvings leave < 1/256 of it.
      expect(threshold - result.load).toBeLessThanOrEqual((2 * threshold) / 256 + 1e-12);
      // Every probe that passed is at or below the capacity found.
      for (const probe of result.probes) if (probe.ttftP99Ms <= 150) expect(probe.load).toBeLessThanOrEqual(result.load);
    });
  }

  it("says 0 when even the lowest load misses the SLO", async () => {
    const slow = await findCapacity(async () => ({ ttftP99Ms: 1000, refused: 0 }), { ...CAPACITY_DEFAULTS, sloTtftP99Ms: 150 });
    expect(slow.load).toBe(0);
    expect(Math.min(...slow.probes.map((probe) => probe.load))).toBeLessThanOrEqual(CAPACITY_DEFAULTS.minLoad * 2);
  });

  it("judges by p99 TTFT alone: requests too long for any slot, refused at every load, do not sink it", async () => {
    const result = await findCapacity(async (load) => ({ ...(await fleet(0.3)(load)), refused: 10 }), { ...CAPACITY_DEFAULTS, sloTtftP99Ms: 150 });
    expect(result.load).toBeGreaterThan(0.29);
  });

  it("stops at maxLoad when nothing fails", async () => {
    const result = await findCapacity(async () => ({ ttftP99Ms: 1, refused: 0 }), { ...CAPACITY_DEFAULTS, sloTtftP99Ms: 150 });
    expect(result.load).toBe(CAPACITY_DEFAULTS.maxLoad);
  });
});
