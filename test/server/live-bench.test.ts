// The live benchmark's smoke run (seconds, tiny model): it completes and reports per-request
// verdicts, so the benchmark code cannot rot.
import { describe, expect, it } from "vitest";
import { runLiveBench } from "../../bench/live/live-bench.js";

describe("bench:live smoke run", () => {
  it("runs every part for a reference arm and a policy, with per-request samples", async () => {
    const results = await runLiveBench({
      preset: "tiny",
      workers: 2,
      threads: 1,
      arms: ["pinned", "shape"],
      agentSessions: 1,
      agentTurns: 3,
      agentContextWords: 200,
      burstRequests: 4,
      burstPromptWords: 30,
      traceRequests: 4,
      tracePrefixes: 2,
      tracePrefixWords: 100,
      traceGapMs: 5,
      maxTokens: 4,
      seed: 1,
    });
    expect(results.map((result) => result.arm)).toEqual(["pinned", "shape"]);
    for (const result of results) {
      expect(result.agentColdTurns).toHaveLength(1);
      expect(result.agentWarmTurns).toHaveLength(2);
      expect(result.burst).toHaveLength(4);
      expect(result.trace).toHaveLength(4);
      // Warm turns are warm: most of each prompt came from the worker's cache.
      for (const turn of result.agentWarmTurns) expect(turn.cachedTokens / turn.promptTokens).toBeGreaterThan(0.5);
    }
    expect(new Set(results[0]!.burst.map((sample) => sample.worker))).toEqual(new Set(["w0"])); // pinned
    expect(new Set(results[1]!.burst.map((sample) => sample.worker))).toEqual(new Set(["w0", "w1"])); // shape spreads one-shots
  });
});
