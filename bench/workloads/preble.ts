// Preble's five workloads (Srivatsa et al., "Preble: Efficient Distributed Prompt Scheduling
// for LLM Serving", ICLR 2025), synthesised from the paper's workload table, as (mean, std):
//
//   workload                    prompt tokens   output tokens   shared prefix   requests per prefix
//   tool use (ToolBench)        1835 (742)      43 (16)         85 %            39
//   embodied agent (ALFWorld)   2285 (471)      16 (13)         97 %            48
//   program generation (APPS)   3871 (1656)     190 (343)       97 %            126
//   video QA (NExT-QA)          9865 (5976)     4 (1.5)         88 %            8.6
//   long-document QA (LooGLE)   23474 (6105)    16 (9.9)        91 %            18
//
// A request's prompt is its prefix's tokens (shared by every request of that prefix: the
// tools' documentation, the environment, the problem, the video, the document) followed by
// tokens of its own. (ALFWorld's agent re-sends a growing history; here, as in the table, each
// environment is one key prefix.)
//
// Lengths are lognormal (lognormal.ts) with the table's moments: positive, right-skewed as
// token lengths are, and heavy-tailed where std > mean (APPS's outputs: a few very long
// programs). A gamma with APPS's output moments would instead be J-shaped, with ~15 % of
// its draws under one token. Every length is rounded and at least 1.
// - Prefix k: L_k lognormal, mean f x the prompt mean (f: the shared fraction).
// - Its requests: own part U = L_k x (1 - f) / f x e, e lognormal with mean 1 and the prompt's
//   coefficient of variation cv, drawn per request. The own part scales with the prefix, so
//   L / (L + U) does not depend on the length: the mean over requests and the share of all
//   prompt tokens, the two readings of the table's figure, are both f (to 0.5 % in expectation).
//   L's spread is what gives the prompt L + U the table's std:
//   E[L^2] = f^2 (std^2 + mean^2) / (1 + (1 - f)^2 cv^2).
// - Outputs: lognormal per request, independent of the prompt.
//
// Prefix popularity: uniform, split evenly. n requests share K = round(n / r) prefixes (r the
// requests per prefix), each prefix n / K of them (give or take one), in a seeded shuffle:
// Preble's own benchmark harness does this ("even" load distribution; Zipf is its separate
// variant, here the toolbench-zipf workload), and it makes the table's r hold in every
// sample, not only on average. Arrivals are a Poisson process of `ratePerS`.
//
// Deterministic: the plan (prefixes, lengths, order, arrivals) comes from `seed` alone, the
// token ids from (seed, salt).
import { lognormal, type Moments } from "./lognormal.js";
import { appendTokens, exactTokens, exponentialMs, mix32, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";

/** One row of Preble's workload table. */
export interface PrebleFigures {
  /** The task and the dataset Preble measured it on. */
  task: string;
  promptTokens: Moments;
  outputTokens: Moments;
  /** Part of a prompt that is its shared prefix, in (0, 1). */
  sharedFraction: number;
  /** Requests that share one prefix. */
  requestsPerPrefix: number;
}

/** A row of the table: prompt and output tokens as [mean, std]. */
function row(task: string, prompt: [number, number], output: [number, number], sharedFraction: number, requestsPerPrefix: number): PrebleFigures {
  return { task, promptTokens: { mean: prompt[0], std: prompt[1] }, outputTokens: { mean: output[0], std: output[1] }, sharedFraction, requestsPerPrefix };
}

export const PREBLE_WORKLOADS = {
  "preble-toolbench": row("tool use (ToolBench)", [1835, 742], [43, 16], 0.85, 39),
  "preble-alfworld": row("embodied agent (ALFWorld)", [2285, 471], [16, 13], 0.97, 48),
  "preble-apps": row("program generation (APPS)", [3871, 1656], [190, 343], 0.97, 126),
  "preble-nextqa": row("video QA (NExT-QA)", [9865, 5976], [4, 1.5], 0.88, 8.6),
  "preble-loogle": row("long-document QA (LooGLE)", [23474, 6105], [16, 9.9], 0.91, 18),
};

export type PrebleWorkloadName = keyof typeof PREBLE_WORKLOADS;

export interface PrebleOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  figures: PrebleFigures;
  /** Requests in the sample. */
  requests: number;
  /** Poisson arrivals, requests per second. */
  ratePerS?: number;
  vocab?: number;
}

/** A request before its tokens: what the seed decides. */
export interface PrebleRequestPlan {
  /** The prefix it shares. */
  group: number;
  prefixTokens: number;
  /** Tokens of its own, after the prefix. */
  ownTokens: number;
  outputTokens: number;
  arrivalMs: number;
}

const ORDER = 0xd001;
const PREFIX_LENGTHS = 0xd002;
const PREFIX = 0xd003;
const OWN = 0xd004;

const length = (x: number) => Math.max(1, Math.round(x));

/** The requests' prefixes, lengths and arrivals, in arrival order. */
export function preblePlan(options: PrebleOptions): PrebleRequestPlan[] {
  const { seed, figures, requests } = options;
  const ratePerS = options.ratePerS ?? 1;
  const { mean, std } = figures.promptTokens;
  const f = figures.sharedFraction;
  if (!(requests >= 1) || !(ratePerS > 0) || !(f > 0 && f < 1) || !(figures.requestsPerPrefix >= 1)) {
    throw new RangeError("preblePlan: requests >= 1, ratePerS > 0, sharedFraction in (0, 1) and requestsPerPrefix >= 1");
  }
  const cv = std / mean;
  const prefixMean = f * mean;
  const prefixSquare = (f ** 2 * (std ** 2 + mean ** 2)) / (1 + (1 - f) ** 2 * cv ** 2);
  const prefixLength = lognormal({ mean: prefixMean, std: Math.sqrt(prefixSquare - prefixMean ** 2) }, structureStream(seed, PREFIX_LENGTHS));
  const prefixes = Math.max(1, Math.round(requests / figures.requestsPerPrefix));
  const prefixTokens = Array.from({ length: prefixes }, () => length(prefixLength()));
  const next = structureStream(seed, ORDER);
  // Each prefix requests / prefixes times (give or take one), in a seeded Fisher-Yates order.
  const groups = Array.from({ length: requests }, (_, i) => i % prefixes);
  for (let i = groups.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [groups[i], groups[j]] = [groups[j]!, groups[i]!];
  }
  const ownScale = lognormal({ mean: 1, std: cv }, next);
  const output = lognormal(figures.outputTokens, next);
  let arrivalMs = 0;
  return groups.map((group, index) => {
    if (index > 0) arrivalMs += exponentialMs(next(), ratePerS);
    const prefix = prefixTokens[group]!;
    return { group, prefixTokens: prefix, ownTokens: length(((prefix * (1 - f)) / f) * ownScale()), outputTokens: length(output()), arrivalMs };
  });
}

/** The plan as prompts: prefix k's tokens, then the request's own. */
export function prebleRequests(options: PrebleOptions): WorkloadRequest[] {
  const { seed, salt } = options;
  const vocab = options.vocab ?? VOCAB;
  return preblePlan(options).map((plan, index) => {
    const tokens: number[] = [];
    appendTokens(tokens, mix32(seed, salt, PREFIX, plan.group), plan.prefixTokens, vocab);
    appendTokens(tokens, mix32(seed, salt, OWN, index), plan.ownTokens, vocab);
    // Preble's harness sends the reference answer's length as max_new_tokens.
    return {
      index,
      arrivalMs: plan.arrivalMs,
      tokens: exactTokens(tokens),
      outputTokens: plan.outputTokens,
      maxTokens: plan.outputTokens,
      group: plan.group,
      messageCount: 2,
    };
  });
}
