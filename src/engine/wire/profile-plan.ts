// What a start-up profile times, shared by both engines' profiles (worker/profile.ts for
// node-llama-cpp, llama-server/profile.ts over HTTP), so their calibrations are alike.

/** Cold prompt lengths: 32, 128, 512 and min(2048, contextSize / 2), those that fit. */
export function defaultProfileSizes(contextSize: number): number[] {
  const largest = Math.min(2048, Math.floor(contextSize / 2));
  return [...new Set([32, 128, 512, largest])].filter((n) => n >= 1 && n <= largest).sort((a, b) => a - b);
}

/** Prompts this short are timed 3 times and the fastest kept (on a shared machine, noise only ever adds time). */
export const repeatsOf = (tokens: number) => (tokens < 256 ? 3 : 1);

/**
 * Suffixes timed on top of the largest cached prompt. Measured on CPU (tiny model, 2k cached):
 * a 32-token suffix took 31 ms but a 128-token one 5 ms: llama.cpp evaluates small batches on a
 * long context at about the decode cost per token. The linear form cannot follow that; the
 * samples keep it so the fit sees it, and online refinement tracks the real traffic's shapes.
 */
export const WARM_EXTENDS = [32, 128, 512];

/** The cold sizes that fit with `decodeTokens` generated after them; throws when none does. */
export function profileSizes(requested: number[] | undefined, contextSize: number, decodeTokens: number): number[] {
  const sizes = [...new Set(requested ?? defaultProfileSizes(contextSize))]
    .filter((n) => Number.isInteger(n) && n >= 1 && n + decodeTokens + 1 <= contextSize)
    .sort((a, b) => a - b);
  if (sizes.length === 0) throw new RangeError(`profile: no prompt size fits a context of ${contextSize} tokens`);
  return sizes;
}
