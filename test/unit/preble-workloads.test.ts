// Preble's five workloads (bench/workloads/preble.ts) against the paper's workload table. The
// table is written out here, not read from the generator, so a changed figure fails.
import { describe, expect, it } from "vitest";
import { PREBLE_WORKLOADS, type PrebleWorkloadName, preblePlan, prebleRequests } from "../../bench/workloads/preble.js";
import type { WorkloadRequest } from "../../bench/workloads/tokens.js";
import { commonPrefixLength } from "../../src/common/tokens.js";

interface Row {
  prompt: [mean: number, std: number];
  output: [mean: number, std: number];
  shared: number;
  perPrefix: number;
  /** Requests whose tokens are built and compared (prompts of ~10M tokens in all). */
  tokenSample: number;
}

const TABLE: Record<PrebleWorkloadName, Row> = {
  "preble-toolbench": { prompt: [1835, 742], output: [43, 16], shared: 0.85, perPrefix: 39, tokenSample: 3000 },
  "preble-alfworld": { prompt: [2285, 471], output: [16, 13], shared: 0.97, perPrefix: 48, tokenSample: 3000 },
  "preble-apps": { prompt: [3871, 1656], output: [190, 343], shared: 0.97, perPrefix: 126, tokenSample: 2000 },
  "preble-nextqa": { prompt: [9865, 5976], output: [4, 1.5], shared: 0.88, perPrefix: 8.6, tokenSample: 1000 },
  "preble-loogle": { prompt: [23474, 6105], output: [16, 9.9], shared: 0.91, perPrefix: 18, tokenSample: 400 },
};

const RATE_PER_S = 10;

function moments(xs: readonly number[]): { mean: number; std: number } {
  const mean = xs.reduce((sum, x) => sum + x, 0) / xs.length;
  return { mean, std: Math.sqrt(xs.reduce((sum, x) => sum + (x - mean) ** 2, 0) / (xs.length - 1)) };
}

/** |measured / expected - 1| <= tolerance. */
function expectWithin(measured: number, expected: number, tolerance: number): void {
  expect(Math.abs(measured / expected - 1), `${measured} vs ${expected}`).toBeLessThanOrEqual(tolerance);
}

/** Per request, the tokens it shares with another request, found from the tokens alone; and the prefixes. */
function sharedFromTokens(requests: readonly WorkloadRequest[]): { shared: number[]; prefixes: number } {
  const byStart = new Map<string, WorkloadRequest[]>();
  for (const request of requests) {
    const key = request.tokens.slice(0, 16).join(",");
    byStart.set(key, [...(byStart.get(key) ?? []), request]);
  }
  const shared = new Array<number>(requests.length).fill(0);
  for (const members of byStart.values()) {
    const [first, second] = members;
    if (!first || !second) continue;
    shared[first.index] = commonPrefixLength(first.tokens, second.tokens);
    for (const other of members.slice(1)) shared[other.index] = commonPrefixLength(first.tokens, other.tokens);
  }
  return { shared, prefixes: byStart.size };
}

for (const [name, row] of Object.entries(TABLE) as [PrebleWorkloadName, Row][]) {
  const figures = PREBLE_WORKLOADS[name];

  describe(name, () => {
    it("matches the table: prompt and output lengths, shared fraction, requests per prefix, Poisson arrivals", () => {
      // 4000 prefixes: a prompt's spread is mostly between prefixes, and APPS's outputs are
      // heavy-tailed, so a sample of a few thousand requests would estimate the std to
      // +-10-20 %; over 20 seeds the worst miss here is 6 % (APPS's output std).
      const plan = preblePlan({ seed: 1, salt: 1, figures, requests: Math.round(4000 * row.perPrefix), ratePerS: RATE_PER_S });
      const prompt = moments(plan.map((p) => p.prefixTokens + p.ownTokens));
      const output = moments(plan.map((p) => p.outputTokens));
      expectWithin(prompt.mean, row.prompt[0], 0.05);
      expectWithin(prompt.std, row.prompt[1], 0.1);
      expectWithin(output.mean, row.output[0], 0.05);
      expectWithin(output.std, row.output[1], 0.1);
      expect(plan.every((p) => p.prefixTokens >= 1 && p.ownTokens >= 1 && p.outputTokens >= 1)).toBe(true);
      // Both readings of "shared %": the mean over requests and the share of all prompt tokens.
      const perRequest = plan.reduce((sum, p) => sum + p.prefixTokens / (p.prefixTokens + p.ownTokens), 0) / plan.length;
      const ofTokens = plan.reduce((sum, p) => sum + p.prefixTokens, 0) / plan.reduce((sum, p) => sum + p.prefixTokens + p.ownTokens, 0);
      expectWithin(perRequest, row.shared, 0.02);
      expectWithin(ofTokens, row.shared, 0.02);
      expectWithin(plan.length / new Set(plan.map((p) => p.group)).size, row.perPrefix, 0.02);
      // Exponential gaps: mean 1 / rate, standard deviation equal to the mean.
      const gaps = moments(plan.slice(1).map((p, i) => p.arrivalMs - plan[i]!.arrivalMs));
      expectWithin(gaps.mean, 1000 / RATE_PER_S, 0.05);
      expectWithin(gaps.std, gaps.mean, 0.05);
      expect(plan.every((p, i) => i === 0 || p.arrivalMs >= plan[i - 1]!.arrivalMs)).toBe(true);
    });

    it(`${row.tokenSample} requests' tokens: each prefix's requests share exactly it, and the table's figures hold`, () => {
      const options = { seed: 2, salt: 5, figures, requests: row.tokenSample, ratePerS: RATE_PER_S };
      const plan = preblePlan(options);
      const requests = prebleRequests(options);
      const { shared, prefixes } = sharedFromTokens(requests);
      requests.forEach((request, i) => {
        const planned = plan[i]!;
        expect(request.tokens).toHaveLength(planned.prefixTokens + planned.ownTokens);
        expect([request.group, request.outputTokens, request.maxTokens, request.arrivalMs]).toEqual([
          planned.group,
          planned.outputTokens,
          planned.outputTokens,
          planned.arrivalMs,
        ]);
        // Exactly the prefix (a request's own tokens may repeat another's by chance, rarely twice).
        expect(shared[i]).toBeGreaterThanOrEqual(planned.prefixTokens);
        expect(shared[i]).toBeLessThan(planned.prefixTokens + 3);
      });
      expect(prefixes).toBe(new Set(plan.map((p) => p.group)).size);
      const perRequest = requests.reduce((sum, request) => sum + shared[request.index]! / request.tokens.length, 0) / requests.length;
      expectWithin(perRequest, row.shared, 0.02);
      expectWithin(requests.length / prefixes, row.perPrefix, 0.02);
    });

    it("is deterministic for a seed and salt; a salt changes every token, a seed the shape", () => {
      const shape = (request: WorkloadRequest) => ({ ...request, tokens: request.tokens.length });
      const a = prebleRequests({ seed: 3, salt: 1, figures, requests: 60 });
      expect(prebleRequests({ seed: 3, salt: 1, figures, requests: 60 })).toEqual(a);
      const salted = prebleRequests({ seed: 3, salt: 2, figures, requests: 60 });
      expect(salted.map(shape)).toEqual(a.map(shape));
      expect(salted.map((request, i) => commonPrefixLength(request.tokens, a[i]!.tokens))).toEqual(a.map(() => 0));
      expect(prebleRequests({ seed: 4, salt: 1, figures, requests: 60 }).map(shape)).not.toEqual(a.map(shape));
    });
  });
}

it("rejects a sample or rate that is not positive", () => {
  const figures = PREBLE_WORKLOADS["preble-apps"];
  expect(() => preblePlan({ seed: 1, salt: 1, figures, requests: 0 })).toThrow(RangeError);
  expect(() => preblePlan({ seed: 1, salt: 1, figures, requests: 10, ratePerS: 0 })).toThrow(RangeError);
});
