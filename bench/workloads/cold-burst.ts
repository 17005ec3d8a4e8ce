// A cold burst: `count` distinct one-shot prompts (one message each, nothing shared), all
// sent at once: pinning everything to one worker leaves the others idle; only spreading
// the burst uses every worker's prefill. Prompt lengths uniform in
// [min, max] tokens, outputs `outputTokens`.
import { appendTokens, exactTokens, mix32, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";

export interface ColdBurstOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  count?: number;
  promptTokens?: { min: number; max: number };
  outputTokens?: number;
  vocab?: number;
}

export const COLD_BURST_DEFAULTS = { count: 16, promptTokens: { min: 1024, max: 3072 }, outputTokens: 128, vocab: VOCAB } as const;

const STRUCTURE = 0xc001;
const PROMPT = 0xc002;

export function coldBurstRequests(options: ColdBurstOptions): WorkloadRequest[] {
  const o = { ...COLD_BURST_DEFAULTS, ...options };
  if (!(o.count >= 1) || !(o.promptTokens.min >= 1) || !(o.promptTokens.max >= o.promptTokens.min))
    throw new RangeError("coldBurstRequests: count >= 1 and 1 <= min <= max");
  const next = structureStream(o.seed, STRUCTURE);
  return Array.from({ length: o.count }, (_, index) => {
    const length = o.promptTokens.min + Math.floor(next() * (o.promptTokens.max - o.promptTokens.min + 1));
    const tokens = appendTokens([], mix32(o.seed, o.salt, PROMPT, index), length, o.vocab);
    return { index, arrivalMs: 0, tokens: exactTokens(tokens), outputTokens: o.outputTokens, maxTokens: o.outputTokens, group: index, messageCount: 1 };
  });
}
