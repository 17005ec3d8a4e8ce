// One request list, two runs: the live benchmark replays it over HTTP against a real server,
// the simulator (bench/sim/simulator.ts) runs it with the calibrated CPU time model, and the
// two are compared request for request (how well does the simulator predict the live run). Both sides get the same prompts (token ids), the same arrival times and the
// same max_tokens; the list comes from a bench/workloads generator.
//
// Token ids: the generators draw ids from Mistral's 32k vocabulary; the served model (the
// `tiny` and `bench` presets share src/presets/vocab.ts, ~1.6k pieces) refuses ids outside its
// own. The generator is asked for ids in [0, ordinary pieces) and shifted onto the model's
// ordinary (type "normal") pieces, so equal ids stay equal (shared prefixes stay shared) and
// no prompt holds a control token (`<|im_end|>` is the models' EOS) or a byte token (as the
// calibration profile, which times random ordinary tokens). The server puts BOS in front of a
// token prompt; the simulator is given the prompt with that BOS, i.e. exactly what a worker
// evaluates.
import { buildVocab } from "../../src/presets/vocab.js";
import type { PolicyOptions } from "../../src/scheduler/registry.js";
import type { SchedulerOptions } from "../../src/scheduler/global-scheduler.js";
import type { Placement, PlacementPolicy, PlacementRequest, WorkerView } from "../../src/scheduler/types.js";
import { simulate, type SimResult, type WorkerSpec } from "../sim/simulator.js";
import type { WorkloadRequest } from "../workloads/tokens.js";
import { toolbenchZipf } from "../workloads/toolbench-zipf.js";

/** One request of a replay, as the client sends it. */
export interface ReplayRequest {
  index: number;
  /** When the client sends it, ms from the start of the replay. */
  arrivalMs: number;
  /** The prompt: token ids of the served model's vocabulary (the server adds BOS). */
  tokens: number[];
  /** max_tokens of the request; the simulator generates exactly this many. */
  maxTokens: number;
  /** The shared prefix it uses (the generator's group). */
  group: number;
}

export interface ToolbenchReplayOptions {
  seed: number;
  /** Per-run salt: every token id changes, the shape does not. */
  salt: number;
  requests: number;
  prefixes: number;
  /** Mean shared-prefix length (90-110 % each). */
  prefixTokens: number;
  /** Mean unique-suffix length (75-125 % each). */
  suffixTokens: number;
  outputTokens: { min: number; max: number };
  /** Poisson arrivals, requests per second. */
  ratePerS: number;
}

/**
 * Preble's ToolBench shape (Zipf a = 1.1 over shared prefixes, a unique question each) scaled
 * to 2 CPU workers of the `bench` model: 6 prefixes of ~1000 tokens (Preble: ~1000 of ~2000),
 * ~100-token questions (Preble: ~200), outputs 16-64 (Preble: 16-256), 30 requests at 2/s.
 */
export const TOOLBENCH_REPLAY_DEFAULTS: Omit<ToolbenchReplayOptions, "seed" | "salt"> = {
  requests: 30,
  prefixes: 6,
  prefixTokens: 1000,
  suffixTokens: 100,
  outputTokens: { min: 16, max: 64 },
  ratePerS: 2,
};

/** The models' ordinary pieces: ids [first, first + count). */
export function ordinaryTokenRange(): { first: number; count: number; bos: number } {
  const vocab = buildVocab();
  const first = vocab.types.findIndex((type, id) => id > vocab.imEndId && type === 1);
  let count = 0;
  while (first + count < vocab.types.length && vocab.types[first + count] === 1) count++;
  return { first, count, bos: vocab.bosId };
}

/** The toolbench-zipf generator's first `requests` requests, in the served model's ids. */
export function toolbenchReplay(options: ToolbenchReplayOptions): ReplayRequest[] {
  const { first, count } = ordinaryTokenRange();
  const generator = toolbenchZipf({
    seed: options.seed,
    salt: options.salt,
    prefixes: options.prefixes,
    prefixTokens: options.prefixTokens,
    suffixTokens: options.suffixTokens,
    outputTokens: options.outputTokens,
    ratePerS: options.ratePerS,
    vocab: count,
  });
  const out: ReplayRequest[] = [];
  for (let i = 0; i < options.requests; i++) {
    const request = generator.next().value;
    out.push({
      index: request.index,
      arrivalMs: request.arrivalMs,
      tokens: request.tokens.map((id) => first + id),
      maxTokens: request.outputTokens,
      group: request.group,
    });
  }
  return out;
}

/** The replay as the simulator's requests: each prompt with the BOS the server adds, one message (a /v1/completions prompt). */
export function simRequests(replay: readonly ReplayRequest[], bos = ordinaryTokenRange().bos): WorkloadRequest[] {
  return replay.map((request) => ({
    index: request.index,
    arrivalMs: request.arrivalMs,
    tokens: request.tokens[0] === bos ? [...request.tokens] : [bos, ...request.tokens],
    outputTokens: request.maxTokens,
    maxTokens: request.maxTokens,
    group: request.group,
    messageCount: 1,
  }));
}

/**
 * The live benchmark's `pinned` arm in the simulator: every request on w0, as the server does
 * for `x-radixgate-worker: w0` (the policy is skipped, the placement booked with reason "pinned").
 */
export class PinnedPolicy implements PlacementPolicy {
  readonly name = "pinned";

  constructor(private readonly workerId = "w0") {}

  place(_request: PlacementRequest, candidates: readonly WorkerView[]): Placement | undefined {
    const worker = candidates.find((candidate) => candidate.id === this.workerId);
    return worker && { workerId: worker.id, reason: "pinned", matchedTokens: worker.matchedTokens };
  }
}

/** The policy of a live arm: `pinned` (all on w0), `spread` (roundrobin), else a registry policy. */
export function simPolicyOf(arm: string): string | PlacementPolicy {
  return arm === "pinned" ? new PinnedPolicy() : arm === "spread" ? "roundrobin" : arm;
}

/** Runs one arm of the replay in the simulator. */
export function simulateReplay(options: {
  arm: string;
  replay: readonly ReplayRequest[];
  workers: number;
  spec: WorkerSpec;
  policyOptions?: PolicyOptions;
  scheduler?: Partial<Omit<SchedulerOptions, "now">>;
}): Promise<SimResult> {
  return simulate({
    policy: simPolicyOf(options.arm),
    ...(options.policyOptions ? { policyOptions: options.policyOptions } : {}),
    ...(options.scheduler ? { scheduler: options.scheduler } : {}),
    workers: options.workers,
    spec: options.spec,
    requests: simRequests(options.replay),
  });
}
