// Reference shapes of grouped shared prefixes: `groups` system prompts
// of `systemTokens` each, `perGroup` questions of `questionTokens` per group, every request a
// system prompt plus its own question, `outputTokens` generated.
//   - SGLang's "generated-shared-prefix" benchmark (bench_serving.py --dataset-name
//     generated-shared-prefix): 64 groups x 16 prompts, system 2048 / question 128 / output 256.
//   - llm-d's precise prefix-cache routing guide: 150 groups x 5, system 6000 / question 1200
//     / output 1000, Poisson arrivals (the guide sweeps 3-60 QPS).
// The requests are shuffled (seeded), as SGLang's benchmark shuffles its prompts, and arrive
// as a Poisson process of `ratePerS`.
import { appendTokens, exactTokens, exponentialMs, mix32, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";

export interface SharedPrefixShape {
  groups: number;
  perGroup: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
}

export const SGLANG_GSP: SharedPrefixShape = { groups: 64, perGroup: 16, systemTokens: 2048, questionTokens: 128, outputTokens: 256 };
export const LLMD_PRECISE: SharedPrefixShape = { groups: 150, perGroup: 5, systemTokens: 6000, questionTokens: 1200, outputTokens: 1000 };

export interface SharedPrefixOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  shape: SharedPrefixShape;
  /** Poisson arrivals, requests per second. */
  ratePerS?: number;
  vocab?: number;
}

const ORDER = 0xb001;
const SYSTEM = 0xb002;
const QUESTION = 0xb003;

export function sharedPrefixRequests(options: SharedPrefixOptions): WorkloadRequest[] {
  const { seed, salt, shape } = options;
  const ratePerS = options.ratePerS ?? 1;
  const vocab = options.vocab ?? VOCAB;
  if (!(shape.groups >= 1 && shape.perGroup >= 1 && shape.systemTokens >= 1 && shape.questionTokens >= 1 && ratePerS > 0)) {
    throw new RangeError("sharedPrefixRequests: groups, perGroup, systemTokens, questionTokens and ratePerS must be positive");
  }
  const next = structureStream(seed, ORDER);
  // (group, question) pairs in a seeded Fisher-Yates order.
  const order = Array.from({ length: shape.groups * shape.perGroup }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let arrivalMs = 0;
  return order.map((pair, index) => {
    const group = Math.floor(pair / shape.perGroup);
    if (index > 0) arrivalMs += exponentialMs(next(), ratePerS);
    const tokens: number[] = [];
    appendTokens(tokens, mix32(seed, salt, SYSTEM, group), shape.systemTokens, vocab);
    appendTokens(tokens, mix32(seed, salt, QUESTION, pair), shape.questionTokens, vocab);
    return { index, arrivalMs, tokens: exactTokens(tokens), outputTokens: shape.outputTokens, maxTokens: shape.outputTokens, group, messageCount: 2 };
  });
}
