// ToolBench-like workload as the Preble paper evaluates it: many tool-use prompts
// share one of `prefixes` long system prompts (tool documentation, ~2000 tokens), picked with
// Zipf(a = 1.1) popularity, each followed by a unique question (~200 tokens); arrivals are a
// Poisson process. Prefix k (0-based) has popularity rank k + 1.
//
// Deterministic: the structure (which prefix, lengths, arrivals, outputs) comes from `seed`
// alone; the token ids come from (seed, salt), so two salts give the same shape with
// different tokens. Prefix tokens are regenerated per request rather than kept, so the
// generator holds O(prefixes) numbers, never the corpus.
import { appendTokens, exactTokens, exponentialMs, mix32, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";

export interface ToolbenchZipfOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  /** Distinct shared prefixes. Preble's ToolBench: ~1000 tools' documentation. */
  prefixes?: number;
  /** Mean prefix length; each prefix is 90-110 % of it. */
  prefixTokens?: number;
  /** Mean unique suffix length; each suffix is 75-125 % of it. */
  suffixTokens?: number;
  /** Zipf exponent over prefixes. Preble: 1.1. */
  zipfA?: number;
  /** Poisson arrival rate, requests per second. */
  ratePerS?: number;
  /** Output lengths, uniform in [min, max]. */
  outputTokens?: { min: number; max: number };
  vocab?: number;
}

export const TOOLBENCH_ZIPF_DEFAULTS = {
  prefixes: 1000,
  prefixTokens: 2000,
  suffixTokens: 200,
  zipfA: 1.1,
  ratePerS: 20,
  outputTokens: { min: 16, max: 256 },
  vocab: VOCAB,
} as const;

// Stream and key tags: distinct constants so that no two streams coincide.
const STRUCTURE = 0x7001;
const PREFIX_LENGTHS = 0x7002;
const PREFIX = 0x7003;
const SUFFIX = 0x7004;

/** Cumulative Zipf(a) probabilities over ranks 1..n. */
export function zipfCdf(n: number, a: number): Float64Array {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 0; k < n; k++) {
    sum += 1 / (k + 1) ** a;
    cdf[k] = sum;
  }
  for (let k = 0; k < n; k++) cdf[k]! /= sum;
  cdf[n - 1] = 1;
  return cdf;
}

/** The first index whose cumulative probability exceeds `u` (binary search). */
export function sampleCdf(cdf: Float64Array, u: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cdf[mid]! > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** An endless stream of requests, in arrival order. */
export function* toolbenchZipf(options: ToolbenchZipfOptions): Generator<WorkloadRequest, never, undefined> {
  const o = { ...TOOLBENCH_ZIPF_DEFAULTS, ...options };
  const { seed, salt, prefixes, vocab } = o;
  if (!(prefixes >= 1) || !(o.prefixTokens >= 1) || !(o.suffixTokens >= 1) || !(o.ratePerS > 0)) {
    throw new RangeError("toolbenchZipf: prefixes, prefixTokens, suffixTokens and ratePerS must be positive");
  }
  const lengths = structureStream(seed, PREFIX_LENGTHS);
  const prefixLength = Array.from({ length: prefixes }, () => Math.max(1, Math.round(o.prefixTokens * (0.9 + 0.2 * lengths()))));
  const cdf = zipfCdf(prefixes, o.zipfA);
  const next = structureStream(seed, STRUCTURE);
  let arrivalMs = 0;
  for (let index = 0; ; index++) {
    const group = sampleCdf(cdf, next());
    const suffixLength = Math.max(1, Math.round(o.suffixTokens * (0.75 + 0.5 * next())));
    const outputTokens = o.outputTokens.min + Math.floor(next() * (o.outputTokens.max - o.outputTokens.min + 1));
    if (index > 0) arrivalMs += exponentialMs(next(), o.ratePerS);
    const tokens: number[] = [];
    appendTokens(tokens, mix32(seed, salt, PREFIX, group), prefixLength[group]!, vocab);
    appendTokens(tokens, mix32(seed, salt, SUFFIX, index), suffixLength, vocab);
    yield { index, arrivalMs, tokens: exactTokens(tokens), outputTokens, group };
  }
}
