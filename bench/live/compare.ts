// Simulator vs live on one request list (target: simulated mean TTFT within
// 25 % of the live one). For every arm, a real server replays the list over HTTP (live-bench.ts,
// part "replay"), then the simulator runs the same list with the time model the server itself
// was calibrated with (the models/.calibration/ file of its workers) and the server's own
// settings: workers, slots, context size (KV cells per slot), batch size, the local
// scheduler's chunk and priority groups, the policy's and the global scheduler's options.
// What is compared: the mean (and p50) TTFT and end-to-end latency, per request the cached
// fraction and the worker it ran on.
//
// The prediction is the simulator's CPU card (`cpu`): the calibrated time model, one decode
// pass per run of consecutive busy slots, the worker's state store, and the host's contention: a step
// that starts while another worker of the host has requests running takes longer, by the
// factors the "two workers, two each" probe measures on this machine before the arms run (the
// calibration profiles one worker alone on an idle machine; on a CPU box the workers share
// its cores with each other and with Node's own threads). Next to it, the same list on cards
// that leave a part out, to show what each accounts for:
//   gpu-style  one decode pass per step for all sequences (full batches, one unified pass), no state store;
//   store      + the state store (evicted slot contents saved to host memory and loaded back);
//   cpu-alone  + a decode pass per run of consecutive busy slots, 1.6x one sequence's when it
//              holds two or more (each worker as if alone on the machine);
//   cpu        + the host's contention: the prediction.
import { MIN_RESTORE_GAIN } from "../../src/engine/wire/protocol.js";
import { fitSpill } from "../../src/serving/spill-budget.js";
import { distribution, type Distribution } from "../sim/metrics.js";
import { PRESETS } from "../../src/presets/make-model.js";
import { CPU_MULTI_SEQUENCE_PASS, cpuSpec, kvBytesPerToken, readTimeModelFile } from "../sim/hardware.js";
import type { SimResult, SpillSpec, WorkerSpec } from "../sim/simulator.js";
import type { TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import { armsOfRun, liveConfig, runLiveBench, type LiveOptions, type ReplaySample } from "./live-bench.js";
import { mulberry32 } from "../../src/common/random.js";
import { ordinaryTokenRange, simulateReplay, type ReplayRequest } from "./replay.js";

export interface SimVsLiveOptions {
  preset: LiveOptions["preset"];
  workers: number;
  threads: number;
  arms: string[];
  replay: readonly ReplayRequest[];
  /** A time-model file to simulate with instead of the server's own calibration. */
  timeModelFile?: string;
  onProgress?: (line: string) => void;
}

export interface SideSummary {
  n: number;
  ttftMs: Distribution;
  latencyMs: Distribution;
  /** Mean of the per-request cached fractions. */
  cachedFraction: number;
  /** Requests per worker. */
  placed: Record<string, number>;
}

export interface ArmComparison {
  arm: string;
  live: SideSummary;
  /** The prediction: the `cpu` card. */
  sim: SideSummary;
  /** Every card, the prediction included. */
  variants: Record<SimVariant, SideSummary>;
  /** sim / live. */
  ttftMeanRatio: number;
  ttftP50Ratio: number;
  latencyMeanRatio: number;
  latencyP50Ratio: number;
  /** Requests the simulator put on the same worker as the live server. */
  sameWorker: number;
  /** Requests whose live output was not max_tokens long (the simulator always generates max_tokens). */
  shortOutputs: number;
  /** Latest a live request was sent after its arrival time, ms (timer lateness). */
  maxSendLatenessMs: number;
  /** |sim / live - 1| <= 0.25 for mean TTFT. */
  withinTarget: boolean;
}

export const SIM_VARIANTS = ["gpu-style", "store", "cpu-alone", "cpu"] as const;
export type SimVariant = (typeof SIM_VARIANTS)[number];
/** The card whose numbers are the simulator's prediction. */
export const PREDICTION: SimVariant = "cpu";

export interface SimVsLiveResult {
  calibration: { path: string; existedBefore: boolean };
  timeModel: TimeModelCoefficients;
  /** The prediction's card. */
  spec: WorkerSpec;
  /** The host's contention on the `cpu` card (1 and 1 when no probe measured it). */
  contention: Contention;
  rows: ArmComparison[];
  live: { arm: string; replay: ReplaySample[] }[];
  sim: { arm: string; variants: Record<SimVariant, SimResult> }[];
}

/** The target: simulated mean TTFT within 25 % of the live one. */
export const TARGET_RELATIVE_ERROR = 0.25;

function side(samples: readonly { ttftMs: number; latencyMs: number; cachedFraction: number; worker: string }[]): SideSummary {
  const placed: Record<string, number> = {};
  for (const sample of samples) placed[sample.worker] = (placed[sample.worker] ?? 0) + 1;
  return {
    n: samples.length,
    ttftMs: distribution(samples.map((s) => s.ttftMs)),
    latencyMs: distribution(samples.map((s) => s.latencyMs)),
    cachedFraction: samples.reduce((sum, s) => sum + s.cachedFraction, 0) / Math.max(1, samples.length),
    placed,
  };
}

const simSide = (result: SimResult) =>
  side(result.records.map((r) => ({ ttftMs: r.ttftMs, latencyMs: r.e2eMs, cachedFraction: r.cachedFraction, worker: r.workerId })));

/**
 * The simulated card of the live server: its calibrated model, slots, cells per slot, batch,
 * chunk and priority groups; for all but `gpu-style` its state store (config spill, the
 * budget fitted as the server fits it, in tokens of the preset's F16 KV cache); for `cpu` the
 * host's contention.
 */
export function specOfLive(
  options: Pick<SimVsLiveOptions, "preset" | "workers" | "threads">,
  timeModel: TimeModelCoefficients,
  variant: SimVariant = PREDICTION,
  contention: Contention = NO_CONTENTION,
): WorkerSpec {
  const config = liveConfig(options, "roundrobin");
  const model = config.models[0]!;
  const local = config.scheduler.local;
  // The budget each live worker gets: the configured one fitted to the state folder, as the server fits it.
  const budgetBytes = fitSpill(config.spill, options.workers).spill.budgetBytes;
  const spill: SpillSpec | undefined =
    variant !== "gpu-style" && budgetBytes > 0
      ? {
          budgetTokens: Math.floor(budgetBytes / kvBytesPerToken(PRESETS[options.preset])),
          minTokens: config.spill.minTokens,
          minRestoreGain: MIN_RESTORE_GAIN,
        }
      : undefined;
  const card = cpuSpec(timeModel, {
    slots: model.slots,
    contextSize: model.contextSize,
    batchTokens: model.batchSize,
    ...(spill ? { spill } : {}),
  });
  return {
    ...card,
    ...(variant === "cpu" && contention !== NO_CONTENTION
      ? { contention: { prefillFactor: contention.prefillFactor, decodeFactor: contention.decodeFactor } }
      : {}),
    ...(variant === "cpu" && contention.multiSequencePass !== undefined ? { multiSequencePassFactor: contention.multiSequencePass } : {}),
    chunkTokens: local.chunkTokens,
    priorityGroups: local.priorityGroups,
    quotaPerGroup: local.quotaPerGroup,
    decodeBatching: variant === "gpu-style" || variant === "store" ? "shared" : "micro-batch",
  };
}

export type Contention = {
  prefillFactor: number;
  decodeFactor: number;
  /**
   * What a decode pass of two or more sequences costs on this machine, served, in steps of one
   * sequence alone (the card's multiSequencePassFactor), from the "four decode together" probe;
   * absent: the card's measured default.
   */
  multiSequencePass?: number;
};
const NO_CONTENTION: Contention = { prefillFactor: 1, decodeFactor: 1 };

/** Live first (a real server per arm), then the simulator on the same list. */
export async function runSimVsLive(options: SimVsLiveOptions, contention?: Contention): Promise<SimVsLiveResult> {
  const { live, calibration } = await runLiveReplay(options);
  return simulateAgainstLive(options, live, calibration, contention);
}

/** The live half: a real server per arm replays the list. */
export async function runLiveReplay(
  options: SimVsLiveOptions,
): Promise<{ live: { arm: string; replay: ReplaySample[] }[]; calibration: { path: string; existedBefore: boolean } }> {
  const live = await runLiveBench({
    preset: options.preset,
    workers: options.workers,
    threads: options.threads,
    arms: options.arms,
    parts: ["replay"],
    replay: options.replay,
    // Parts (a)-(c) do not run.
    agentSessions: 0,
    agentTurns: 0,
    agentContextWords: 0,
    burstRequests: 0,
    burstPromptWords: 0,
    traceRequests: 0,
    tracePrefixes: 0,
    tracePrefixWords: 0,
    traceGapMs: 0,
    maxTokens: 0,
    seed: 0,
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  });
  const paths = new Set(live.map((arm) => arm.calibration.path));
  if (paths.size !== 1) throw new Error(`sim-vs-live: the arms' servers used different calibrations: ${[...paths].join(", ")}`);
  return { live: live.map((arm) => ({ arm: arm.arm, replay: arm.replay })), calibration: live[0]!.calibration };
}

/** The live arms `repeats` times, taking turns (in reverse order every other time, so no arm
 *  is always the one that runs after the same other); each arm's samples from every run. */
export async function repeatedLiveReplay(options: SimVsLiveOptions, repeats: number): Promise<Awaited<ReturnType<typeof runLiveReplay>>> {
  const samples = new Map<string, ReplaySample[]>(options.arms.map((arm) => [arm, []]));
  let calibration: Awaited<ReturnType<typeof runLiveReplay>>["calibration"] | undefined;
  for (let run = 0; run < repeats; run++) {
    const arms = armsOfRun(options.arms, run);
    options.onProgress?.(`live run ${run + 1} of ${repeats}: ${arms.join(", ")}`);
    const live = await runLiveReplay({ ...options, arms });
    if (calibration && live.calibration.path !== calibration.path)
      throw new Error(`sim-vs-live: the runs' servers used different calibrations: ${calibration.path}, ${live.calibration.path}`);
    calibration ??= live.calibration;
    for (const arm of live.live) samples.get(arm.arm)!.push(...arm.replay);
  }
  return { live: options.arms.map((arm) => ({ arm, replay: samples.get(arm)! })), calibration: calibration! };
}

/** The simulator on the replay of recorded live arms (runSimVsLive's second half; also for re-simulating a recorded run). */
export async function simulateAgainstLive(
  options: SimVsLiveOptions,
  live: readonly { arm: string; replay: ReplaySample[] }[],
  calibration: { path: string; existedBefore: boolean },
  contention: Contention = NO_CONTENTION,
): Promise<SimVsLiveResult> {
  const timeModel = readTimeModelFile(options.timeModelFile ?? calibration.path);
  const cards = Object.fromEntries(SIM_VARIANTS.map((variant) => [variant, specOfLive(options, timeModel, variant, contention)])) as Record<
    SimVariant,
    WorkerSpec
  >;
  const rows: ArmComparison[] = [];
  const sim: SimVsLiveResult["sim"] = [];
  for (const liveArm of live) {
    const config = liveConfig(options, liveArm.arm);
    options.onProgress?.(`${liveArm.arm}: simulating the same ${options.replay.length} requests`);
    const results = {} as Record<SimVariant, SimResult>;
    for (const variant of SIM_VARIANTS) {
      results[variant] = await simulateReplay({
        arm: liveArm.arm,
        replay: options.replay,
        workers: options.workers,
        spec: cards[variant],
        policyOptions: config.scheduler,
        scheduler: config.scheduler,
      });
    }
    sim.push({ arm: liveArm.arm, variants: results });
    const prediction = results[PREDICTION];
    const liveSide = side(
      liveArm.replay.map((s) => ({ ttftMs: s.ttftMs, latencyMs: s.totalMs, cachedFraction: s.cachedTokens / Math.max(1, s.promptTokens), worker: s.worker })),
    );
    const predicted = simSide(prediction);
    const simWorker = new Map(prediction.records.map((r) => [r.index, r.workerId]));
    const maxTokens = new Map(options.replay.map((r) => [r.index, r.maxTokens]));
    const ttftMeanRatio = predicted.ttftMs.mean / liveSide.ttftMs.mean;
    rows.push({
      arm: liveArm.arm,
      live: liveSide,
      sim: predicted,
      variants: Object.fromEntries(SIM_VARIANTS.map((variant) => [variant, simSide(results[variant])])) as Record<SimVariant, SideSummary>,
      ttftMeanRatio,
      ttftP50Ratio: predicted.ttftMs.p50 / liveSide.ttftMs.p50,
      latencyMeanRatio: predicted.latencyMs.mean / liveSide.latencyMs.mean,
      latencyP50Ratio: predicted.latencyMs.p50 / liveSide.latencyMs.p50,
      sameWorker: liveArm.replay.filter((s) => simWorker.get(s.index) === s.worker).length,
      shortOutputs: liveArm.replay.filter((s) => s.completionTokens !== maxTokens.get(s.index)).length,
      maxSendLatenessMs: Math.max(0, ...liveArm.replay.map((s) => s.sentMs - options.replay[s.index]!.arrivalMs)),
      withinTarget: Math.abs(ttftMeanRatio - 1) <= TARGET_RELATIVE_ERROR,
    });
  }
  return { calibration, timeModel, spec: cards[PREDICTION], contention, rows, live: live.map((arm) => ({ arm: arm.arm, replay: arm.replay })), sim };
}

/** A small live-vs-sim case that isolates one effect (sim-vs-live.ts runs them after the replay). */
export interface Probe {
  name: string;
  isolates: string;
  workers: number;
  arm: string;
  replay: ReplayRequest[];
}

export interface ProbeResult {
  name: string;
  isolates: string;
  workers: number;
  requests: number;
  live: SideSummary;
  variants: Record<SimVariant, SideSummary>;
}

/** The probes, with prompts of random ordinary tokens from `seed` (no two share a prefix unless stated). */
export function probes(seed: number): Probe[] {
  const { first, count } = ordinaryTokenRange();
  const random = mulberry32(seed);
  const tokens = (n: number) => Array.from({ length: n }, () => first + Math.floor(random() * count));
  const request = (index: number, arrivalMs: number, prompt: number[], maxTokens: number): ReplayRequest => ({
    index,
    arrivalMs,
    tokens: prompt,
    maxTokens,
    group: index,
  });
  return [
    {
      name: "alone",
      isolates: "one request on an idle worker: the time model itself, plus HTTP, tokenization and the first evaluation's one-off cost",
      workers: 1,
      arm: "pinned",
      replay: [request(0, 0, tokens(1100), 40)],
    },
    {
      name: "two workers busy",
      isolates:
        "both workers prefilling then decoding at once on the 2 cores, next to the server's and the client's own threads (the calibration profiles one worker alone)",
      workers: 2,
      arm: "spread",
      replay: [request(0, 0, tokens(2000), 100), request(1, 0, tokens(2000), 100)],
    },
    {
      name: "four decode together",
      isolates: "a decode step of four sequences in slots side by side (one pass on a CPU, costing more than one sequence's)",
      workers: 1,
      arm: "pinned",
      replay: [0, 1, 2, 3].map((i) => request(i, 0, tokens(100), 200)),
    },
    {
      name: "used slot while three decode",
      isolates:
        "a request given a used slot while three others decode (before node-llama-cpp was patched it waited for the context lock until they ended; now it starts within a step)",
      workers: 1,
      arm: "pinned",
      replay: [request(0, 0, tokens(100), 10), ...[1, 2, 3, 4].map((i) => request(i, 1000 + i * 5, tokens(100), 200))],
    },
    {
      name: "two workers, two each",
      isolates:
        "both workers prefilling then decoding two requests each at once, as the arms keep several on each worker (the contention the prediction carries is read here)",
      workers: 2,
      arm: "spread",
      replay: [0, 1, 2, 3].map((i) => request(i, 0, tokens(2000), 100)),
    },
  ];
}

/**
 * Where the contention is read: two requests on each worker, as the arms keep several; a
 * recorded file from before that probe has only one on each.
 */
const CONTENTION_PROBES = ["two workers, two each", "two workers busy"];

/**
 * What the prediction's card takes from the probes. The host's contention, from the first of
 * CONTENTION_PROBES the results hold: live over simulated (`cpu-alone`) time to the first
 * token (the prefill, plus HTTP), and the same for the rest (the decode). The cost of a decode
 * pass of several sequences, from "four decode together".
 */
export function contentionOf(results: readonly ProbeResult[]): Contention | undefined {
  const probe = CONTENTION_PROBES.map((name) => results.find((result) => result.name === name)).find((found) => found !== undefined);
  if (!probe) return undefined;
  // One worker decoding four sequences side by side: its live decode over the card's, which
  // prices every such step at CPU_MULTI_SEQUENCE_PASS x one sequence's (plus each sequence's
  // attention, left as it is: with these short contexts it is a small part of the step).
  const four = results.find((result) => result.name === "four decode together");
  const measuredPass = four ? (CPU_MULTI_SEQUENCE_PASS * decodeMs(four.live)) / decodeMs(aloneCard(four)) : Number.NaN;
  const multiSequencePass = Number.isFinite(measuredPass) && measuredPass > 0 ? measuredPass : undefined;
  const sim = aloneCard(probe);
  const prefillFactor = probe.live.ttftMs.mean / sim.ttftMs.mean;
  // Several requests on a worker decode in passes the card will price at the measured factor:
  // the contention is what the live decode took beyond that.
  const passScale = probe.requests > probe.workers && multiSequencePass !== undefined ? multiSequencePass / CPU_MULTI_SEQUENCE_PASS : 1;
  const decodeFactor = decodeMs(probe.live) / (decodeMs(sim) * passScale);
  if (!(Number.isFinite(prefillFactor) && Number.isFinite(decodeFactor) && prefillFactor > 0 && decodeFactor > 0)) return undefined;
  return { prefillFactor, decodeFactor, ...(multiSequencePass !== undefined ? { multiSequencePass } : {}) };
}

/** A probe's simulation on the card without contention (files written before the card carried contention call it `cpu`). */
const aloneCard = (probe: ProbeResult): SideSummary => probe.variants["cpu-alone"] ?? (probe.variants as Partial<Record<string, SideSummary>>).cpu!;

/** The mean time after the first token: the decode. */
const decodeMs = (side: SideSummary) => side.latencyMs.mean - side.ttftMs.mean;

/** Runs every probe live (a fresh server each) and in the simulator (without contention: the probes measure it). */
export async function runProbes(options: Pick<SimVsLiveOptions, "preset" | "threads" | "timeModelFile" | "onProgress">, seed: number): Promise<ProbeResult[]> {
  const results: ProbeResult[] = [];
  for (const probe of probes(seed)) {
    options.onProgress?.(`probe "${probe.name}"`);
    const run = await runSimVsLive({ ...options, workers: probe.workers, arms: [probe.arm], replay: probe.replay, onProgress: () => {} });
    const row = run.rows[0]!;
    results.push({ name: probe.name, isolates: probe.isolates, workers: probe.workers, requests: probe.replay.length, live: row.live, variants: row.variants });
  }
  return results;
}
