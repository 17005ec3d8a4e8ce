// Preble's hot-prefix test (PreblePolicy.isHot) against a plain reading of its rule: the
// prefix's mean TTFT in the second half of the window is at least hotTtftRatio x the first
// half's, with at least hotMinSamples in each half; the history keeps the samples of the
// window at the last push (at most the last 256 by time), in time order, slotting a sample
// whose clock went back in place.
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/common/random.js";
import { PreblePolicy } from "../../src/scheduler/policies/preble.js";
import type { Placement, PlacementRequest } from "../../src/scheduler/types.js";

const WINDOW_MS = 1000;
const LIMIT = 256;
const SETTINGS = { hotTtftRatio: 2, hotMinSamples: 3, windowMs: WINDOW_MS };

/** The same rule, on a plain list of the live samples. */
class ReferenceHistory {
  samples: { at: number; ttft: number }[] = [];

  push(at: number, ttft: number): void {
    let i = this.samples.length;
    while (i > 0 && this.samples[i - 1]!.at > at) i--;
    this.samples.splice(i, 0, { at, ttft });
    const horizon = at - WINDOW_MS;
    while (this.samples.length > 0 && this.samples[0]!.at < horizon) this.samples.shift();
    while (this.samples.length > LIMIT) this.samples.shift();
  }

  isHot(now: number): boolean {
    const middle = now - WINDOW_MS / 2;
    const horizon = now - WINDOW_MS;
    const first = this.samples.filter((s) => s.at >= horizon && s.at < middle);
    const second = this.samples.filter((s) => s.at >= middle);
    if (first.length < SETTINGS.hotMinSamples || second.length < SETTINGS.hotMinSamples) return false;
    const mean = (list: { ttft: number }[]) => list.reduce((sum, s) => sum + s.ttft, 0) / list.length;
    return mean(second) >= SETTINGS.hotTtftRatio * mean(first);
  }
}

describe("preble's hot prefixes", () => {
  for (const seed of [1, 2, 3, 4]) {
    it(`agrees with the rule read plainly, through slowdowns, gaps, a clock that goes back and the sample limit (seed ${seed})`, () => {
      const policy = new PreblePolicy(SETTINGS);
      const reference = new ReferenceHistory();
      const random = mulberry32(seed);
      const placement: Placement = { workerId: "w0", reason: "exploit", matchedTokens: 1, prefixKey: 7 };
      const request: PlacementRequest = { modelId: "m", tokens: [1], messageCount: 1 };
      let now = 0;
      let hot = 0;
      let checks = 0;
      for (let i = 0; i < 4000; i++) {
        const step = random();
        // Mostly forward in small steps; now and then a gap past the window, a burst at one
        // instant, or a clock that goes back.
        // A dense phase puts more samples in one window than the history keeps.
        const dense = i % 2000 >= 1400;
        if (dense) now += step < 0.05 ? -Math.floor(random() * 20) : Math.floor(random() * 3);
        else now += step < 0.02 ? 1500 : step < 0.1 ? 0 : step < 0.15 ? -Math.floor(random() * 200) : Math.floor(random() * 20);
        // Integer TTFTs keep every sum exact; a slow phase every so often makes prefixes hot.
        const ttft = Math.floor((i % 120 < 60 ? 100 : 400) * (0.5 + random()));
        policy.onRequestComplete(placement, request, { ok: true, promptTokens: 1, cachedTokens: 0, completionTokens: 1, ttftMs: ttft }, now);
        reference.push(now, ttft);
        for (const at of [now, now + Math.floor(random() * 600)]) {
          const expected = reference.isHot(at);
          expect(policy.isHot("m", 7, at)).toBe(expected);
          checks++;
          if (expected) hot++;
        }
      }
      // Both verdicts came up often enough for the comparison to mean something.
      expect(hot).toBeGreaterThan(checks / 50);
      expect(checks - hot).toBeGreaterThan(checks / 50);
    });
  }
});
