// The live benchmark's smoke run (seconds, tiny model): it completes and reports per-request
// verdicts, so the benchmark code cannot rot; and the replay path (sim-vs-live): a generator's
// request list sent over HTTP as token prompts, and the simulator on the same list.
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { PREDICTION, repeatedLiveReplay, runSimVsLive, SIM_VARIANTS } from "../../bench/live/compare.js";
import { bothVerdicts, runLiveBench, runLiveBenchRuns, type LiveOptions } from "../../bench/live/live-bench.js";
import { ordinaryTokenRange, simRequests, toolbenchReplay } from "../../bench/live/replay.js";

describe("bench:live smoke run", () => {
  it("runs every part for a reference arm and a policy, twice, the arms taking turns, with per-request samples", async () => {
    const progress: string[] = [];
    const runs = await runLiveBenchRuns(
      {
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
        onProgress: (line) => progress.push(line),
      },
      2,
    );
    expect(progress.filter((line) => line.startsWith("run "))).toEqual(["run 1 of 2: pinned, shape", "run 2 of 2: shape, pinned"]);
    // The second run's servers started in the reverse order: shape's agent loop came first.
    const agentLines = progress.filter((line) => line.endsWith(": agent loop"));
    expect(agentLines).toEqual(["pinned: agent loop", "shape: agent loop", "shape: agent loop", "pinned: agent loop"]);
    expect(runs).toHaveLength(2);
    for (const results of runs) {
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
    }
    // Each run salts its prompts anew: the second run's first turn found nothing cached.
    expect(runs[1]![0]!.agentColdTurns[0]!.cachedTokens).toBeLessThan(0.5 * runs[1]![0]!.agentColdTurns[0]!.promptTokens);
    const verdicts = bothVerdicts(runs, ["pinned", "shape"]);
    expect(verdicts.map((verdict) => verdict.arm)).toEqual(["shape"]);
    expect(verdicts[0]!.warmVsPinnedRuns).toHaveLength(2);
    expect(verdicts[0]!.burstVsSpreadRuns.every(Number.isNaN)).toBe(true); // no spread arm in this run
  });
});

/** Two sessions of three turns and a burst of four, on the tiny model. */
const SPLIT_SMOKE: LiveOptions = {
  preset: "tiny",
  workers: 2,
  threads: 1,
  arms: ["split"],
  agentSessions: 2,
  agentTurns: 3,
  agentContextWords: 200,
  burstRequests: 4,
  burstPromptWords: 30,
  traceRequests: 0,
  tracePrefixes: 1,
  tracePrefixWords: 10,
  traceGapMs: 5,
  maxTokens: 4,
  seed: 1,
  parts: ["agent", "burst"],
};

describe("bench:live's split reference arm", () => {
  it("keeps every agent session and burst prompt on one worker of its own: its index modulo the workers", async () => {
    const [split] = await runLiveBench(SPLIT_SMOKE);
    expect(split!.burst.map((sample) => sample.worker)).toEqual(["w0", "w1", "w0", "w1"]);
    expect(split!.agentColdTurns.map((sample) => sample.worker).sort()).toEqual(["w0", "w1"]);
    expect(split!.agentWarmTurns.map((sample) => sample.worker).sort()).toEqual(["w0", "w0", "w1", "w1"]);
    // Each session's later turns found its history cached on its worker.
    for (const turn of split!.agentWarmTurns) expect(turn.cachedTokens / turn.promptTokens).toBeGreaterThan(0.5);
  });

  it("is refused for a replayed list, which has no sessions to pin", async () => {
    const replay = toolbenchReplay({
      seed: 1,
      salt: 7,
      requests: 1,
      prefixes: 1,
      prefixTokens: 20,
      suffixTokens: 5,
      outputTokens: { min: 2, max: 2 },
      ratePerS: 5,
    });
    await expect(runLiveBench({ ...SPLIT_SMOKE, parts: ["replay"], replay })).rejects.toThrow(/"split" arm pins sessions/);
  });
});

describe("bench:sim-vs-live smoke run", () => {
  // Seed 1's shape: arrivals 0, 163, 380, 438 ms; prefixes 0, 0, 1, 1 (~200 tokens); max_tokens 5, 7, 8, 8. The gaps
  // leave each prefix time to be computed (simulated with this machine's calibration) before its second request.
  const replay = toolbenchReplay({
    seed: 1,
    salt: 7,
    requests: 4,
    prefixes: 2,
    prefixTokens: 200,
    suffixTokens: 20,
    outputTokens: { min: 4, max: 8 },
    ratePerS: 5,
  });

  it("maps the generator's ids onto the model's ordinary tokens, equal ids staying equal", () => {
    const { first, count } = ordinaryTokenRange();
    for (const request of replay) for (const id of request.tokens) expect(id >= first && id < first + count).toBe(true);
    expect(replay.map((request) => request.group)).toEqual([0, 0, 1, 1]);
    // Requests of one group share their prefix (token for token), others do not.
    const shared = (a: number[], b: number[]) => a.findIndex((id, i) => id !== b[i]);
    expect(shared(replay[0]!.tokens, replay[1]!.tokens)).toBeGreaterThan(150);
    expect(shared(replay[0]!.tokens, replay[2]!.tokens)).toBeLessThan(5);
    // The simulator gets what a worker evaluates: BOS first.
    expect(simRequests(replay).map((request) => request.tokens.length)).toEqual(replay.map((request) => request.tokens.length + 1));
  });

  it("replays the list live and in the simulator, with per-request samples on both sides", async () => {
    const result = await runSimVsLive({ preset: "tiny", workers: 2, threads: 1, arms: ["pinned"], replay });
    expect(existsSync(result.calibration.path)).toBe(true);
    const live = result.live[0]!.replay;
    expect(live.map((sample) => sample.index).sort()).toEqual([0, 1, 2, 3]);
    for (const sample of live) {
      const request = replay[sample.index]!;
      expect(sample.worker).toBe("w0");
      expect(sample.promptTokens).toBe(request.tokens.length + 1); // the BOS the server adds
      expect(sample.completionTokens).toBeGreaterThan(0);
      expect(sample.ttftMs).toBeGreaterThan(0);
      expect(sample.totalMs).toBeGreaterThanOrEqual(sample.ttftMs);
    }
    // A second request of a group finds its prefix on w0 (deterministic in the simulator, likely live).
    const simulated = result.sim[0]!.variants[PREDICTION].records;
    expect(simulated.map((record) => record.index)).toEqual([0, 1, 2, 3]);
    expect(simulated[1]!.cachedTokens).toBeGreaterThan(150);
    expect(simulated[3]!.cachedTokens).toBeGreaterThan(150);
    expect(live.some((sample) => sample.cachedTokens > 150)).toBe(true);
    for (const variant of SIM_VARIANTS) expect(result.sim[0]!.variants[variant].records).toHaveLength(4);
    const row = result.rows[0]!;
    expect(row).toMatchObject({ arm: "pinned", sameWorker: 4 });
    expect(row.live.n).toBe(4);
    expect(row.sim.n).toBe(4);
    expect(Number.isFinite(row.ttftMeanRatio) && row.ttftMeanRatio > 0).toBe(true);
    expect(Number.isFinite(row.latencyMeanRatio) && row.latencyMeanRatio > 0).toBe(true);
  });

  it("repeats the live arms taking turns, reversed every other run, and keeps every run's samples", async () => {
    const progress: string[] = [];
    const runs = await repeatedLiveReplay(
      { preset: "tiny", workers: 2, threads: 1, arms: ["pinned", "spread"], replay, onProgress: (line) => progress.push(line) },
      2,
    );
    expect(progress.filter((line) => line.startsWith("live run"))).toEqual(["live run 1 of 2: pinned, spread", "live run 2 of 2: spread, pinned"]);
    expect(runs.live.map((arm) => arm.arm)).toEqual(["pinned", "spread"]);
    for (const arm of runs.live) expect(arm.replay.map((sample) => sample.index).sort()).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
    expect(runs.live[0]!.replay.every((sample) => sample.worker === "w0")).toBe(true);
    expect(existsSync(runs.calibration.path)).toBe(true);
  });
});
