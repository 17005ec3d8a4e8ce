// The discrete-event simulator (bench/sim/): hand-computed schedules on tiny cases, determinism,
// per-request verdicts, the spread-vs-pin difference on an agent loop, and the GPU
// cards as the worker Radixgate runs (KV cells per slot sized from memory, state store, no lock).
import { describe, expect, it } from "vitest";
import { DEFAULT_CONTEXT_SIZE, DEFAULT_GPU, gpuSpec, isIdealised } from "../../bench/sim/hardware.js";
import { ceilingSection } from "../../bench/sim/capacity-run.js";
import { summarize } from "../../bench/sim/metrics.js";
import { type ArmRecord, headlines, isIdealisedSpec, markdown, type SimReport } from "../../bench/sim/report.js";
import { Links, REQUEST_BYTES_PER_TOKEN, routerTimeModel } from "../../bench/sim/network.js";
import { type NetworkSpec, simulate, type SimOptions, type WorkerSpec } from "../../bench/sim/simulator.js";
import { consecutiveRuns } from "../../bench/sim/sim-worker.js";
import { SimStore } from "../../bench/sim/sim-store.js";
import { atLoad, buildWorkload } from "../../bench/sim/workloads.js";
import type { WorkloadRequest } from "../../bench/workloads/tokens.js";
import { MIN_RESTORE_GAIN } from "../../src/engine/wire/protocol.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../../src/scheduler/local-scheduler-settings.js";
import { TimeModel, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { PlacementPolicy, WorkerView } from "../../src/scheduler/types.js";

/** A linear card: prefill 1 ms per evaluated token, nothing fixed; a decode step 10 ms whatever the batch. */
const LINEAR: TimeModelCoefficients = {
  base: 0,
  perExtend: 1,
  perContext: 0,
  perExtendContext: 0,
  decodeBase: 10,
  decodePerContext: 0,
  copyBase: 0,
  copyPerToken: 0,
};

const TINY: WorkerSpec = {
  timeModel: LINEAR,
  slots: 2,
  capacityTokens: 100_000,
  batchTokens: 10_000,
  chunkTokens: 1000,
  priorityGroups: LOCAL_SCHEDULER_DEFAULTS.priorityGroups,
  quotaPerGroup: LOCAL_SCHEDULER_DEFAULTS.quotaPerGroup,
};

function ids(seed: number, length: number): number[] {
  return Array.from({ length }, (_, i) => 1 + ((seed * 7919 + i * 104_729) % 30_000));
}

function request(index: number, arrivalMs: number, tokens: number[], outputTokens: number, extra: Partial<WorkloadRequest> = {}): WorkloadRequest {
  return { index, arrivalMs, tokens, outputTokens, group: index, ...extra };
}

/** A policy that places every request on the first candidate, after noting `read` of it in `seen`. */
function firstWorkerSpy(seen: number[], read: (worker: WorkerView) => number): PlacementPolicy {
  return {
    name: "spy",
    place: (_request, candidates) => {
      seen.push(read(candidates[0]!));
      return { workerId: candidates[0]!.id, reason: "spy", matchedTokens: 0 };
    },
  };
}

const run = (requests: WorkloadRequest[], policy = "roundrobin", options: Partial<SimOptions> = {}) =>
  simulate({ policy, workers: 2, spec: TINY, requests, ...options });

describe("simulator: what the scheduler is told", () => {
  it("a prompt's prefill is pending on its worker until its first token, not until a slot takes it", async () => {
    // One worker, linear card. A (2000 tokens) prefills in [0, 2000): two chunks of 1000; its first token at 2000.
    // B arrives at 500, during A's prefill; C at 2050, once A decodes (and B, 10 tokens, has had its first token at 2020).
    const seen: number[] = [];
    const spy = firstWorkerSpy(seen, (worker) => worker.pendingPrefillTokens);
    const requests = [request(0, 0, ids(1, 2000), 10), request(1, 500, ids(2, 10), 2), request(2, 2050, ids(3, 10), 2)];
    await simulate({ policy: spy, workers: 1, spec: TINY, requests });
    expect(seen).toEqual([0, 2000, 0]);
  });
});

describe("simulator: hand-computed schedules (two workers, three requests, linear card)", () => {
  it("continuous batching: a late request's prefill shares a step with a running request's decode", async () => {
    const a = ids(1, 100);
    const requests = [request(0, 0, a, 3), request(1, 0, ids(2, 200), 2), request(2, 50, [...a, ...ids(3, 50)], 1)];
    // roundrobin: A -> w0, B -> w1, C -> w0.
    // w0: step 1 [0, 100): A's prefill, 100 tokens x 1 ms. A's first token at 100 (TTFT 100).
    //     C arrives at 50 and takes w0's other slot: A's slot is busy, so nothing is shared (cached 0).
    //     step 2 [100, 260): A decodes one token (10 ms) + C's prefill, 150 tokens (150 ms) = 160 ms.
    //       C's first (and only) token at 260: TTFT = E2E = 260 - 50 = 210. A has 2 tokens.
    //     step 3 [260, 270): A's last token. A: E2E 270.
    // w1: step 1 [0, 200): B's prefill (TTFT 200); step 2 [200, 210): its second token: E2E 210.
    const result = await run(requests);
    const byIndex = result.records.map((r) => ({ worker: r.workerId, ttft: r.ttftMs, e2e: r.e2eMs, cached: r.cachedTokens }));
    expect(byIndex).toEqual([
      { worker: "w0", ttft: 100, e2e: 270, cached: 0 },
      { worker: "w1", ttft: 200, e2e: 210, cached: 0 },
      { worker: "w0", ttft: 210, e2e: 210, cached: 0 },
    ]);
    expect(result.workers.map((w) => w.busyMs)).toEqual([270, 210]);
    expect(result.workers.map((w) => w.steps)).toEqual([3, 2]);
    expect(result.endMs).toBe(270);
  });

  it("prefix reuse: a later request on the same worker evaluates only its new suffix", async () => {
    const a = ids(1, 100);
    const requests = [request(0, 0, a, 3), request(1, 0, ids(2, 200), 2), request(2, 350, [...a, ...ids(3, 50)], 1)];
    // A: w0, TTFT 100, tokens 2 and 3 at 110 and 120: E2E 120. B: w1, TTFT 200, E2E 210.
    // C -> w0 at 350: A's idle slot holds A's 100 tokens, C's first 100: the LocalScheduler gives
    //   C that slot, 100 tokens are cached and 50 evaluated: 50 ms. TTFT = E2E = 50, cached 100/150.
    const result = await run(requests);
    expect(result.records.map((r) => [r.workerId, r.ttftMs, r.e2eMs, r.cachedTokens])).toEqual([
      ["w0", 100, 120, 0],
      ["w1", 200, 210, 0],
      ["w0", 50, 50, 100],
    ]);
    expect(result.records[2]!.cachedFraction).toBeCloseTo(100 / 150, 12);
    expect(result.workers.map((w) => w.prefillTokens)).toEqual([150, 200]);
  });

  it("at most prompt - 1 tokens are reused: the last prompt token is always evaluated", async () => {
    const a = ids(4, 100);
    const result = await run([request(0, 0, a, 1), request(1, 0, ids(5, 10), 1), request(2, 500, a, 1)]);
    // The same 100-token prompt again on w0: 99 cached, 1 evaluated (1 ms).
    expect(result.records[2]).toMatchObject({ workerId: "w0", cachedTokens: 99, ttftMs: 1 });
  });
});

describe("simulator: a host's contention (a CPU box whose workers share its cores)", () => {
  it("slows a step that starts while another worker has requests running, by the card's factors, and no other step", async () => {
    const requests = [request(0, 0, ids(1, 100), 3), request(1, 10, ids(2, 200), 2)];
    // w0: step 1 [0, 100): A's prefill while w1 is idle: not slowed. TTFT 100.
    // w1: B arrives at 10 while A runs on w0: its prefill takes 200 x 2 = 400 ms: TTFT 400.
    // w0: steps 2 and 3 start while B runs on w1: 10 x 3 = 30 ms each: A's E2E 160.
    // w1: step 2 starts at 410, A long done: 10 ms: B's E2E 420 - 10 = 410.
    const contended = await run(requests, "roundrobin", { spec: { ...TINY, contention: { prefillFactor: 2, decodeFactor: 3 } } });
    expect(contended.records.map((r) => [r.workerId, r.ttftMs, r.e2eMs])).toEqual([
      ["w0", 100, 160],
      ["w1", 400, 410],
    ]);
    expect(contended.workers.map((w) => w.contendedSteps)).toEqual([2, 1]);
    // The same card without contention: A 100 / 120, B 200 / 210.
    const alone = await run(requests);
    expect(alone.records.map((r) => [r.ttftMs, r.e2eMs])).toEqual([
      [100, 120],
      [200, 210],
    ]);
  });
});

describe("simulator: agent loops, spread vs pin", () => {
  // Turn 2 re-sends turn 1 (500 tokens) and adds 100: it comes 100 ms after turn 1's response.
  const first = ids(6, 500);
  const loop = [
    request(0, 0, first, 4, { messageCount: 2, session: 0 }),
    request(1, 0, [...first, ...ids(7, 100)], 4, { messageCount: 4, session: 0, after: 0, thinkMs: 100 }),
  ];

  it("roundrobin sends the second turn to the other worker, which recomputes everything; affinity pins it and reuses the history", async () => {
    const spread = await run(loop, "roundrobin");
    const pinned = await run(loop, "affinity");
    // Turn 1 alone: 500 ms prefill + 3 decode steps of 10 ms.
    expect(spread.records[0]).toMatchObject({ ttftMs: 500, e2eMs: 530 });
    expect(pinned.records[0]).toMatchObject({ ttftMs: 500, e2eMs: 530 });
    // Turn 2 arrives at 530 + 100 = 630.
    expect(spread.records[1]).toMatchObject({ arrivalMs: 630, workerId: "w1", cachedTokens: 0, ttftMs: 600, e2eMs: 630 });
    expect(pinned.records[1]).toMatchObject({ arrivalMs: 630, workerId: "w0", cachedTokens: 500, ttftMs: 100, e2eMs: 130 });
    expect(pinned.records[1]!.cachedFraction).toBeCloseTo(500 / 600, 12);
    expect(spread.records[1]!.cachedFraction).toBe(0);
  });
});

describe("simulator: an answer stays in its slot, as on the real worker", () => {
  // A short question, a long answer the workload knows (300 tokens), then the next turn: the
  // question, the answer sent back and 50 tokens more.
  const first = ids(8, 100);
  const answer = ids(9, 300);
  const loop = (known: boolean) => [
    request(0, 0, first, answer.length, { messageCount: 2, session: 0, ...(known ? { answerTokens: answer } : {}) }),
    request(1, 0, [...first, ...answer, ...ids(10, 50)], 4, { messageCount: 4, session: 0, after: 0, thinkMs: 100 }),
  ];

  it("the next turn reuses the answer but its last token, and preble's tree knows the slot holds it", async () => {
    const known = await run(loop(true), "preble");
    // The slot holds the prompt and 299 of the 300 generated tokens (the last is sampled, never
    // evaluated); the tree matched them too, so E2 exploits (399 cached against 51 to compute).
    expect(known.records[1]).toMatchObject({ workerId: known.records[0]!.workerId, reason: "exploit", cachedTokens: 399 });
    // Where the workload knows only the answer's length, the tree matches the first prompt
    // alone (100 against 350 to compute): preble explores, and the slot reuses the prompt at most.
    const counted = await run(loop(false), "preble");
    expect(counted.records[1]!.reason).toBe("explore");
    expect(counted.records[1]!.cachedTokens).toBeLessThanOrEqual(100);
  });
});

describe("simulator: the ceiling of reuse (every card holds every prompt seen; not a real fleet)", () => {
  it("a prompt reuses what an earlier prompt shares with it on a card that never held it, free", async () => {
    // roundrobin: A (100 tokens) -> w0 at 0; C (A + 50 new) -> w1 at 350, which never held A.
    const a = ids(11, 100);
    const requests = [request(0, 0, a, 1), request(1, 350, [...a, ...ids(12, 50)], 1)];
    const real = await run(requests);
    const ceiling = await run(requests, "roundrobin", { reuseCeiling: true });
    expect(real.records[1]).toMatchObject({ workerId: "w1", cachedTokens: 0, ttftMs: 150 });
    // Under the ceiling w1 reuses A's 100 tokens with no load time: 50 evaluated, 50 ms.
    expect(ceiling.records[1]).toMatchObject({ workerId: "w1", cachedTokens: 100, ttftMs: 50 });
    // A prompt no earlier one shares anything with reuses nothing there either.
    expect(ceiling.records[0]).toMatchObject({ cachedTokens: 0, ttftMs: 100 });
  });

  it("the next turn reuses the answer an earlier turn left on another card, as the slot that ran it would", async () => {
    const first = ids(13, 100);
    const answer = ids(14, 300);
    const loop = [
      request(0, 0, first, answer.length, { messageCount: 2, session: 0, answerTokens: answer }),
      request(1, 0, [...first, ...answer, ...ids(15, 50)], 4, { messageCount: 4, session: 0, after: 0, thinkMs: 100 }),
    ];
    const ceiling = await run(loop, "roundrobin", { reuseCeiling: true });
    // roundrobin sends turn 2 to w1; it reuses the prompt and 299 of the answer's 300 tokens.
    expect(ceiling.records[1]).toMatchObject({ workerId: "w1", cachedTokens: 399 });
    const real = await run(loop, "roundrobin");
    expect(real.records[1]).toMatchObject({ workerId: "w1", cachedTokens: 0 });
  });

  it("the report sets the ceiling beside the policies and says which targets it leaves out of reach", () => {
    const fleet = { workload: "preble-toolbench", card: "a6000-mistral-7b", workers: 4, sloTtftP99Ms: 2000, load: 1, probes: 10, refused: 0 };
    const capacity = [
      { ...fleet, policy: "preble", ratePerS: 6.6 },
      { ...fleet, policy: "cache-aware", ratePerS: 6.5 },
      { ...fleet, policy: "roundrobin", ratePerS: 6.4 },
    ];
    const ceiling = [
      { ...fleet, balancer: "roundrobin", ratePerS: 8 },
      { ...fleet, balancer: "least-load", ratePerS: 9 },
    ];
    const table = ceilingSection(capacity, ceiling).join("\n");
    // The better balancer is the ceiling: 9 / 6.4 roundrobin, 9 / 6.5 the best published rule.
    expect(table).toContain(
      "| preble-toolbench | a6000-mistral-7b x 4 | 8.00 / 9.00 | 1.41x | 1.38x | 0.73x | out of reach: the ceiling is 0.70x of it | within the ceiling |",
    );
  });
});

describe("simulator: determinism and per-request verdicts", () => {
  const spec: WorkerSpec = {
    ...TINY,
    timeModel: { ...LINEAR, perExtend: 0.05, decodeBase: 2, decodePerContext: 1e-4, base: 0.5 },
    slots: 8,
    capacityTokens: 40_000,
  };
  const sample = buildWorkload("toolbench-zipf", { seed: 3, salt: 17, size: 150, workers: 3, maxLoad: 1 });
  const { requests } = atLoad(sample, 0.8, spec, 3, 150);

  it("is deterministic for a seed: the same records twice, for every policy", async () => {
    for (const policy of ["preble", "cache-aware", "roundrobin", "shape"]) {
      const a = await simulate({ policy, workers: 3, spec, requests });
      const b = await simulate({ policy, workers: 3, spec, requests });
      expect(a.records).toEqual(b.records);
      expect(a.workers).toEqual(b.workers);
      expect(a.records).toHaveLength(150);
    }
  });

  it("reports each request's own cached fraction, and the summary's histogram covers every request", async () => {
    const result = await simulate({ policy: "preble", workers: 3, spec, requests });
    for (const record of result.records) {
      expect(record.cachedFraction).toBe(record.cachedTokens / record.promptTokens);
      expect(record.cachedTokens).toBeLessThan(record.promptTokens);
      expect(record.ttftMs).toBeGreaterThan(0);
      expect(record.e2eMs).toBeGreaterThanOrEqual(record.ttftMs);
    }
    // Zipf-shared tool prefixes: some requests find theirs cached.
    expect(result.records.some((record) => record.cachedFraction > 0.5)).toBe(true);
    const summary = summarize(result);
    expect(summary.n).toBe(150);
    expect(summary.cached.histogram.reduce((sum, count) => sum + count, 0)).toBe(150);
    expect(summary.workers).toHaveLength(3);
    for (const worker of summary.workers) expect(worker.utilisation).toBeLessThanOrEqual(1 + 1e-9);
    expect(summary.imbalance.busyMaxOverMean).toBeGreaterThanOrEqual(1);
  });

  it("keeps within the card's KV: a small card evicts and still serves every request", async () => {
    const small: WorkerSpec = { ...spec, capacityTokens: 6_000 };
    const result = await simulate({ policy: "roundrobin", workers: 3, spec: small, requests });
    expect(result.records.length + result.refused.length).toBe(150);
    expect(result.workers.reduce((sum, w) => sum + w.evictions, 0)).toBeGreaterThan(0);
  });

  it("refuses a request larger than a card, and the turns after it still come", async () => {
    const tiny: WorkerSpec = { ...TINY, capacityTokens: 300 };
    const result = await simulate({
      policy: "roundrobin",
      workers: 2,
      spec: tiny,
      requests: [request(0, 0, ids(8, 400), 1), request(1, 0, ids(9, 50), 1, { after: 0, thinkMs: 5 })],
    });
    expect(result.refused).toEqual([0]);
    expect(result.records.map((r) => [r.index, r.arrivalMs])).toEqual([[1, 5]]);
  });
});

describe("simulator: the CPU card (decode passes per run of slots, state store, context lock), hand-computed on one worker", () => {
  const one = (requests: WorkloadRequest[], spec: WorkerSpec) => simulate({ policy: "roundrobin", workers: 1, spec, requests });

  it("micro-batch decode: sequences in consecutive slots share one pass, costing multiSequencePassFactor x decodeBase", async () => {
    const requests = [request(0, 0, ids(10, 100), 3), request(1, 0, ids(11, 100), 3)];
    // Step 1 [0, 200): both prefills (100 + 100 tokens), in slots 0 and 1. Then two decode steps:
    // 10 ms each shared on a GPU card, 15 ms on a CPU card whose two-sequence pass costs 1.5 x 10.
    const shared = await one(requests, TINY);
    const cpu = await one(requests, { ...TINY, decodeBatching: "micro-batch", multiSequencePassFactor: 1.5 });
    expect(shared.records.map((r) => [r.ttftMs, r.e2eMs])).toEqual([
      [200, 220],
      [200, 220],
    ]);
    expect(cpu.records.map((r) => [r.ttftMs, r.e2eMs])).toEqual([
      [200, 230],
      [200, 230],
    ]);
    // What the steps were made of: 200 ms of prefill, then two decode steps of one pass of two sequences.
    const steps = ({ workers: [w] }: typeof cpu) => [w!.prefillMs, w!.decodeMs, w!.decodeSteps, w!.decodePasses, w!.decodeTokens];
    expect(steps(shared)).toEqual([200, 20, 2, 2, 4]);
    expect(steps(cpu)).toEqual([200, 30, 2, 2, 4]);
    // The fleet's step mix the report prints: 30 of 230 ms decoding, one pass a step, two sequences a pass.
    expect(summarize(cpu).steps).toEqual({ decodeShare: 30 / 230, passesPerDecodeStep: 1, sequencesPerPass: 2 });
  });

  it("a started prefill is continued before a more cached prompt that came after it starts", async () => {
    // A cold 1000-token prompt prefills 100 tokens a step from t=1000; at t=1050 a prompt that
    // finds 200 of its 220 tokens cached (a higher priority group) arrives. It waits for the
    // cold prompt's last chunk, and then evaluates its 20 tokens.
    const warm = ids(30, 200);
    const requests = [request(0, 0, warm, 1), request(1, 1000, ids(31, 1000), 1), request(2, 1050, [...warm, ...ids(32, 20)], 1)];
    const result = await one(requests, { ...TINY, slots: 3, chunkTokens: 100 });
    const firstTokenAt = (index: number) => result.records.find((record) => record.index === index)!;
    const [cold, cached] = [firstTokenAt(1), firstTokenAt(2)];
    expect(cached.cachedTokens).toBe(200);
    expect(cold.ttftMs).toBe(1000);
    expect(1050 + cached.ttftMs).toBe(2020);
  });

  it("micro-batch decode: sequences in slots apart run one pass each", async () => {
    // Three prompts fill slots 0, 1 and 2; later, continuations of the first and the third go
    // back to the slots holding their prefixes (0 and 2): two passes a step, 2 x 10 ms.
    const [p, q, r] = [ids(20, 100), ids(21, 100), ids(22, 100)];
    const requests = [
      request(0, 0, p, 1),
      request(1, 0, q, 1),
      request(2, 0, r, 1),
      request(3, 1000, [...p, ...ids(23, 10)], 3),
      request(4, 1000, [...r, ...ids(24, 10)], 3),
    ];
    const spec: WorkerSpec = { ...TINY, slots: 3, decodeBatching: "micro-batch", multiSequencePassFactor: 1.5 };
    const apart = await one(requests, spec);
    const later = apart.records.filter((record) => record.index >= 3);
    expect(later.map((record) => record.cachedTokens)).toEqual([100, 100]);
    expect(later.map((record) => record.e2eMs - record.ttftMs)).toEqual([40, 40]);
    // Their two decode steps took two passes each (the first three prompts' only token came with their prefill).
    const [w] = apart.workers;
    expect([w!.decodeSteps, w!.decodePasses, w!.decodeMs]).toEqual([2, 4, 40]);
    expect(summarize(apart).steps).toMatchObject({ passesPerDecodeStep: 2, sequencesPerPass: 1 });
  });

  it("consecutiveRuns groups slot numbers as llama.cpp groups sequence ids into passes", () => {
    expect(consecutiveRuns([])).toEqual([]);
    expect(consecutiveRuns([3, 0, 1])).toEqual([2, 1]);
    expect(consecutiveRuns([0, 2])).toEqual([1, 1]);
    expect(consecutiveRuns([2, 1, 0, 3])).toEqual([4]);
  });

  it("state store: an overwritten slot's content is saved, and a later prompt sharing its prefix loads it back", async () => {
    const prefix = ids(12, 100);
    const requests = [request(0, 0, [...prefix, ...ids(13, 20)], 1), request(1, 200, ids(14, 80), 1), request(2, 400, [...prefix, ...ids(15, 20)], 1)];
    const oneSlot: WorkerSpec = { ...TINY, slots: 1 };
    const spill = { budgetTokens: 10_000, minTokens: 10, minRestoreGain: 16 };
    // A: 120 ms. B overwrites A's slot (A's 120 tokens are saved): 80 ms. C overwrites B's (saved)
    // and loads A's state, which shares its 100-token prefix: 20 tokens evaluated.
    const without = await one(requests, oneSlot);
    const withStore = await one(requests, { ...oneSlot, spill });
    expect(without.records.map((r) => [r.ttftMs, r.cachedTokens])).toEqual([
      [120, 0],
      [80, 0],
      [120, 0],
    ]);
    expect(withStore.records.map((r) => [r.ttftMs, r.cachedTokens])).toEqual([
      [120, 0],
      [80, 0],
      [20, 100],
    ]);
    expect(withStore.workers[0]).toMatchObject({ spills: 2, restores: 1 });
    // A save and a load each take half of copyMs (2 + 0.1 per token): B waits 7 (saving 120 tokens),
    // C waits 5 (saving B's 80) + 7 (loading A's 120).
    const costly = await one(requests, { ...oneSlot, spill, timeModel: { ...LINEAR, copyBase: 2, copyPerToken: 0.1 } });
    expect(costly.records.map((r) => r.ttftMs)).toEqual([120, 87, 32]);
  });

  it("state store: what it keeps and drops reaches the scheduler with the next start, as the real worker reports it", async () => {
    const prefix = ids(12, 100);
    const requests = [request(0, 0, [...prefix, ...ids(13, 20)], 1), request(1, 200, ids(14, 80), 1), request(2, 400, [...prefix, ...ids(15, 20)], 1)];
    const stored: number[] = [];
    const spy = firstWorkerSpy(stored, (worker) => worker.storedTokens);
    // B's start saved A (120 tokens) and said so: C's placement sees the 100 tokens it shares.
    await simulate({ policy: spy, workers: 1, spec: { ...TINY, slots: 1, spill: { budgetTokens: 10_000, minTokens: 10, minRestoreGain: 16 } }, requests });
    expect(stored).toEqual([0, 0, 100]);
  });

  it("state store: a saved state drops the stored ones it holds all but a short tail of, as the real store does", () => {
    const store = new SimStore({ budgetTokens: 10_000, minTokens: 10, minRestoreGain: 16 }, new TimeModel(LINEAR), () => 0);
    const prefix = ids(40, 150);
    const [a, b, other] = [
      [...prefix, ...ids(41, 30)],
      [...prefix, ...ids(42, 30)],
      [...prefix.slice(0, 30), ...ids(43, 10)],
    ];
    // Each slot's content is saved as a request that shares nothing with it overwrites the slot.
    for (const held of [a, b, other]) expect(store.prepareSlot(held, ids(44, 50), 0).spilled).toBe(true);
    const changes = store.takeChanges()!;
    expect(changes.stored.map((state) => state.tokens)).toEqual([a, b, other]);
    // b holds 150 of a's 180 tokens: a goes. other shares 30 with b: both stay.
    expect(changes.dropped).toEqual([changes.stored[0]!.id]);
    expect(store.holds(b) && store.holds(other) && !store.holds(a)).toBe(true);
    // b's conversation goes on in a slot holding a sibling of it: b's state is loaded, though
    // the sibling's save holds all of it but its question.
    const sibling = [...prefix, ...ids(45, 30)];
    const continued = [...b, ...ids(46, 30)];
    expect(store.prepareSlot(sibling, continued, prefix.length)).toMatchObject({ spilled: true, restored: true, shared: b.length });
    expect(store.takeChanges()!.dropped).toEqual([]);
  });

  it("context lock: a request given a used slot waits until nothing runs on its worker", async () => {
    const requests = [request(0, 0, ids(16, 50), 1), request(1, 100, ids(17, 100), 5), request(2, 205, ids(18, 30), 1)];
    // X [0, 50) in slot 0. A at 100 takes the unused slot 1: prefill [100, 200), tokens at 210..240.
    // B at 205 gets slot 0, which holds X: without the lock it prefills next to A's decode
    // ([210, 250): 10 + 30 ms), so A's last token comes at 270; with it, B waits for A to end at
    // 240, then prefills [240, 270).
    const free = await one(requests, TINY);
    const locked = await one(requests, { ...TINY, contextLock: true });
    expect(free.records.map((r) => [r.ttftMs, r.e2eMs])).toEqual([
      [50, 50],
      [100, 170],
      [45, 45],
    ]);
    expect(locked.records.map((r) => [r.ttftMs, r.e2eMs])).toEqual([
      [50, 50],
      [100, 140],
      [65, 65],
    ]);
    expect(locked.workers[0]).toMatchObject({ lockWaits: 1, lockWaitMs: 35 });
  });
});

describe("simulator: the GPU cards are the worker Radixgate runs (node-llama-cpp: KV cells per slot)", () => {
  // The card's KV, worked out here from its figures: memory x 0.9 usable - bf16 weights, over
  // F16 K and V of every layer (layers x KV heads x 128 dims x 2 x 2 B).
  const KV_TOKENS: Record<string, number> = {
    "a6000-mistral-7b": (48e9 * 0.9 - 14.5e9) / (32 * 8 * 128 * 2 * 2),
    "h100-llama3-70b": (4 * 80e9 * 0.9 - 140e9) / (80 * 8 * 128 * 2 * 2),
  };

  it("slots x contextSize fit the card's KV, with as many slots as fit", () => {
    for (const [name, kvTokens] of Object.entries(KV_TOKENS)) {
      const spec = gpuSpec(name);
      const contextSize = spec.maxSequenceTokens!;
      expect(contextSize).toBe(DEFAULT_CONTEXT_SIZE);
      expect(spec.capacityTokens).toBe(spec.slots * contextSize);
      expect(spec.capacityTokens).toBeLessThanOrEqual(kvTokens);
      expect((spec.slots + 1) * contextSize).toBeGreaterThan(kvTokens);
    }
    expect([gpuSpec("a6000-mistral-7b").slots, gpuSpec("h100-llama3-70b").slots]).toEqual([6, 13]);
    // Overrides: the slots follow a smaller context; slots beyond the KV, or a pool size, are refused.
    expect(gpuSpec("a6000-mistral-7b", { contextSize: 16_384 })).toMatchObject({ slots: 13, capacityTokens: 13 * 16_384, maxSequenceTokens: 16_384 });
    expect(() => gpuSpec("a6000-mistral-7b", { slots: 7 })).toThrow(/do not fit/);
    expect(() => gpuSpec("a6000-mistral-7b", { capacityTokens: 100_000 })).toThrow(/capacity-tokens/);
  });

  it("refuses a request longer than a slot's contextSize, which the idealised shared pool would serve", async () => {
    const spec = gpuSpec(DEFAULT_GPU);
    const contextSize = spec.maxSequenceTokens!;
    // Prompt + output: one token over a slot, then exactly a slot.
    const requests = [request(0, 0, ids(20, contextSize), 1), request(1, 0, ids(21, contextSize - 1), 1)];
    const real = await simulate({ policy: "roundrobin", workers: 1, spec, requests });
    expect(real.refused).toEqual([0]);
    expect(real.records.map((r) => r.index)).toEqual([1]);
    const idealised = await simulate({ policy: "roundrobin", workers: 1, spec: gpuSpec(`${DEFAULT_GPU}-idealised`), requests });
    expect(idealised.refused).toEqual([]);
  });

  it("has the worker's state store (config's 8 GiB) and no context lock: an overwritten slot's content comes back without waiting", async () => {
    const spec = gpuSpec(DEFAULT_GPU);
    // 8 GiB / 128 KiB per token (Mistral-7B).
    expect(spec.spill).toEqual({ budgetTokens: 65_536, minTokens: 64, minRestoreGain: MIN_RESTORE_GAIN });
    expect(spec.contextLock).toBeUndefined();
    // A decode pass per run of consecutive busy slots, each bound by reading the weights once.
    expect(spec).toMatchObject({ decodeBatching: "micro-batch", multiSequencePassFactor: 1 });
    expect(gpuSpec(`${DEFAULT_GPU}-idealised`).decodeBatching).toBe("shared");
    // One slot: B overwrites A (A is saved), C overwrites B and loads A's state, sharing its 100-token prefix.
    const prefix = ids(22, 100);
    const requests = [request(0, 0, [...prefix, ...ids(23, 20)], 1), request(1, 10_000, ids(24, 80), 1), request(2, 20_000, [...prefix, ...ids(25, 20)], 1)];
    const result = await simulate({ policy: "roundrobin", workers: 1, spec: gpuSpec(DEFAULT_GPU, { slots: 1 }), requests });
    expect(result.records.map((r) => r.cachedTokens)).toEqual([0, 0, 100]);
    expect(result.workers[0]).toMatchObject({ spills: 2, restores: 1, lockWaits: 0 });
  });

  it("with cells per slot the pool is never short: no slot's content is evicted for room and no request waits for room", async () => {
    const spec = gpuSpec(DEFAULT_GPU, { contextSize: 4096, slots: 2 });
    const sample = buildWorkload("toolbench-zipf", { seed: 3, salt: 17, size: 150, workers: 3, maxLoad: 1 });
    const result = await simulate({ policy: "preble", workers: 3, spec, requests: atLoad(sample, 1, spec, 3, 150).requests });
    expect(result.records).toHaveLength(150);
    expect(result.workers.map((w) => [w.evictions, w.roomWaits, w.preemptions])).toEqual([
      [0, 0, 0],
      [0, 0, 0],
      [0, 0, 0],
    ]);
  });

  it("the default card is the real one; the markdown report labels an idealised card as such", async () => {
    expect(isIdealised(DEFAULT_GPU)).toBe(false);
    expect(isIdealisedSpec(gpuSpec(DEFAULT_GPU))).toBe(false);
    const idealisedName = `${DEFAULT_GPU}-idealised`;
    const idealised = gpuSpec(idealisedName);
    expect(isIdealisedSpec(idealised)).toBe(true);
    const requests = [request(0, 0, ids(26, 200), 2), request(1, 5, ids(27, 200), 2)];
    const arms: ArmRecord[] = [];
    for (const policy of ["preble", "roundrobin"]) {
      const summary = summarize(await simulate({ policy, workers: 2, spec: idealised, requests }));
      arms.push({ workload: "toolbench-zipf", gpu: idealisedName, workers: 2, load: 1, ratePerS: 1, r0PerS: 1, timeScale: 1, policy, summary, wallS: 0 });
    }
    const report: SimReport = {
      benchmark: "sim",
      date: "2026-01-01T00:00:00.000Z",
      machine: "test",
      node: "v0",
      commit: "0000000",
      command: "test",
      seed: 1,
      salt: 1,
      settings: {
        workloads: ["toolbench-zipf"],
        gpus: [DEFAULT_GPU, idealisedName],
        workers: [2],
        policies: ["preble", "roundrobin"],
        loads: [1],
        sizes: { "toolbench-zipf": 2 },
      },
      hardware: { [DEFAULT_GPU]: gpuSpec(DEFAULT_GPU), [idealisedName]: idealised },
      workloads: { "toolbench-zipf": { describe: "two prompts", requests: 2, kind: "open" } },
      arms,
      headline: headlines(arms),
      totalSeconds: 0,
    };
    const lines = markdown(report).split("\n");
    const row = (gpu: string) => lines.find((line) => line.startsWith(`| ${gpu} |`))!;
    expect(row(idealisedName)).toContain("**idealised**: one pool shared by all slots");
    expect(row(DEFAULT_GPU)).toContain("| per slot |");
    expect(row(DEFAULT_GPU)).not.toContain("idealised");
    expect(lines.some((line) => line.startsWith("**Idealised** cards are NOT the worker Radixgate runs"))).toBe(true);
    // The headline table and the fleet's section name the card, "idealised" included.
    expect(lines.some((line) => line.startsWith(`| toolbench-zipf | ${idealisedName} x 2 |`))).toBe(true);
    expect(lines).toContain(`## toolbench-zipf on 2 x ${idealisedName}`);
  });
});

describe("simulator: engines on several machines behind several routers (network)", () => {
  // 8 Gb/s: 1e6 bytes a ms.
  const network: NetworkSpec = { gpusPerHost: 1, routers: 1, latencyMs: 5, bandwidthGbps: 8, kvBytesPerToken: 10_000, loadEveryMs: 100, hostCopies: true };
  const linkMs = (bytes: number) => bytes / 1e6;

  it("measures latencies at the router: a request crosses to its engine and its answers come back a hop later", async () => {
    const alone = await run([request(0, 0, ids(8, 100), 2)]);
    const far = await run([request(0, 0, ids(8, 100), 2)], "roundrobin", { network });
    // One box: 100 ms prefill, then a 10 ms decode step.
    expect(alone.records[0]).toMatchObject({ ttftMs: 100, e2eMs: 110 });
    // Router -> engine: 5 ms + 100 token ids x 7 bytes; the first token and the end reach the router 5 ms later.
    const there = 5 + linkMs(100 * REQUEST_BYTES_PER_TOKEN);
    expect(far.records[0]!.ttftMs).toBeCloseTo(there + 100 + 5, 9);
    expect(far.records[0]!.e2eMs).toBeCloseTo(there + 110 + 5, 9);
    expect(far.network).toMatchObject({ routers: 1, machines: 3 });
    expect(far.decisions.count).toBe(1);
  });

  it("two routers: an agent's next turn through the other router finds its history from the engines' events", async () => {
    const first = ids(9, 500);
    const loop = [
      request(0, 0, first, 4, { messageCount: 2, session: 0 }),
      request(1, 0, [...first, ...ids(10, 100)], 4, { messageCount: 4, session: 0, after: 0, thinkMs: 100 }),
    ];
    const result = await simulate({ policy: "preble", workers: 2, spec: TINY, requests: loop, network: { ...network, routers: 2 } });
    // Turn 1 went through router 0, turn 2 through router 1, which never placed anything: it
    // exploits the 500 tokens because the engine's slot report reached it too.
    expect(result.records[1]).toMatchObject({ workerId: result.records[0]!.workerId, reason: "exploit", cachedTokens: 500 });
    expect(result.decisions.count).toBe(2);
  });

  it("prices a prefix copy by where it goes: the card's save + load on one machine, plus a hop and the KV bytes over the link between two", async () => {
    const prefix = ids(11, 300);
    // Request 1 shares request 0's 300 tokens; the policy sends it to w1 with a copy of them from w0.
    const copying: PlacementPolicy = {
      name: "copy-to-w1",
      place: (placing, candidates) =>
        placing.tokens.length === 300
          ? { workerId: "w0", reason: "first", matchedTokens: 0 }
          : {
              workerId: candidates.find((worker) => worker.id === "w1")!.id,
              reason: "copy",
              matchedTokens: 300,
              copies: [{ modelId: placing.modelId, fromWorkerId: "w0", toWorkerId: "w1", tokens: placing.tokens.slice(0, 300), copyMs: 0, recomputeMs: 0 }],
            },
    };
    const card: WorkerSpec = { ...TINY, timeModel: { ...LINEAR, copyBase: 2, copyPerToken: 0.01 } };
    const requests = [request(0, 0, prefix, 1), request(1, 1000, [...prefix, ...ids(12, 50)], 1)];
    const within = await simulate({ policy: copying, workers: 2, spec: card, requests, network: { ...network, gpusPerHost: 2 } });
    const across = await simulate({ policy: copying, workers: 2, spec: card, requests, network });
    const saveAndLoad = 2 + 0.01 * 300;
    expect(within.records[1]!.copyMs).toBeCloseTo(saveAndLoad, 9);
    expect(across.records[1]!.copyMs).toBeCloseTo(saveAndLoad + 5 + linkMs(300 * 10_000), 9);
    expect(within.network).toMatchObject({ copiesWithin: 1, copiesAcross: 0 });
    expect(across.network).toMatchObject({ copiesWithin: 0, copiesAcross: 1 });
    // Either way the copied prefix is reused: only the 50 new tokens are evaluated.
    expect(across.records[1]).toMatchObject({ workerId: "w1", cachedTokens: 300 });
  });

  it("the routers' time model prices copies between machines, or, without host copies, as recomputes (never cheaper)", () => {
    const card = { ...LINEAR, copyBase: 2, copyPerToken: 0.01 };
    const priced = new TimeModel(routerTimeModel(card, network, 1000));
    expect(priced.copyMs(300)).toBeCloseTo(2 + 0.01 * 300 + 5 + 300 * (10_000 / 1e6), 9);
    const none = new TimeModel(routerTimeModel({ ...card, perContext: 0.001, perExtendContext: 1e-6 }, { ...network, hostCopies: false }, 1000));
    for (const tokens of [1, 100, 999]) expect(none.copyMs(tokens)).toBeGreaterThanOrEqual(none.prefillMs(tokens, tokens));
  });

  it("a link carries one transfer after another: the second waits for the first", () => {
    const links = new Links(2, { latencyMs: 1, bandwidthGbps: 8 });
    expect(links.arrival(1, 0, 2e6)).toBe(3);
    // Sent at 0 too, it starts when the link is free (3) and takes 1 ms.
    expect(links.arrival(1, 0, 1e6)).toBe(4);
    expect(links.queuedMs).toBe(2);
    // Another machine's link is free.
    expect(links.arrival(0, 0, 1e6)).toBe(2);
  });
});
