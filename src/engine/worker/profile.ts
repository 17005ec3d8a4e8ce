// The worker's half of start-up calibration: the `profile` task times synthetic prompts of
// random ordinary tokens in one sequence: cold prefills of a few lengths, prefills on top of
// a cached prefix (the context terms), decoding, and a save + load of the sequence's KV state
// (the copy cost). It leaves the sequence empty. The host fits the time model from what it
// returns (host/calibration.ts).
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { CopySample, DecodeSample, PrefillSample } from "../../scheduler/time-model.js";
import type { ProfileOptions, ProfileResult } from "../wire/protocol.js";
import { profileSizes, repeatsOf, WARM_EXTENDS } from "../wire/profile-plan.js";
import { defaultStateDir } from "./state-store.js";

/**
 * Times prefills, decoding and a state save + load in `sequence` (an idle slot: the caller
 * reserves it), then clears it. Prompts are random ordinary (non-special, non-end) tokens.
 */
export async function profileSequence(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  options: ProfileOptions = {},
): Promise<Omit<ProfileResult, "workerId" | "slot" | "otherBusySlots">> {
  const started = performance.now();
  const contextSize = sequence.contextSize;
  const decodeTokens = Math.max(0, Math.floor(options.decodeTokens ?? 16));
  const sizes = profileSizes(options.sizes, contextSize, decodeTokens);
  const random = randomTokens(model, options.seed ?? 1);
  const stateDir = defaultStateDir();
  const statePath = join(stateDir, `radixgate-profile-${process.pid}-${randomUUID()}.state`);
  const prefill: PrefillSample[] = [];
  const decode: DecodeSample[] = [];
  const copy: (CopySample & { bytes: number })[] = [];

  /** Evaluates `tokens` after what the sequence holds; times the first token, then `generate` more. */
  const run = async (tokens: Token[], generate: number): Promise<{ prefillMs: number; decodeMsPerToken?: number }> => {
    const t0 = performance.now();
    const generator = sequence.evaluate(tokens);
    try {
      await generator.next();
      const t1 = performance.now();
      for (let i = 0; i < generate; i++) await generator.next();
      const t2 = performance.now();
      return generate > 0 ? { prefillMs: t1 - t0, decodeMsPerToken: (t2 - t1) / generate } : { prefillMs: t1 - t0 };
    } finally {
      await generator.return();
    }
  };
  const truncateTo = async (length: number) => {
    if (sequence.nextTokenIndex <= length) return;
    await sequence.eraseContextTokenRanges([{ start: length, end: sequence.nextTokenIndex }]);
  };
  const measureCopy = async () => {
    const tokens = sequence.nextTokenIndex;
    const t0 = performance.now();
    const { fileSize } = await sequence.saveStateToFile(statePath);
    const saveMs = performance.now() - t0;
    await sequence.clearHistory();
    const t1 = performance.now();
    await sequence.loadStateFromFile(statePath, { acceptRisk: true });
    const loadMs = performance.now() - t1;
    await rm(statePath, { force: true });
    if (sequence.nextTokenIndex !== tokens) {
      throw new Error(`profile: state load restored ${sequence.nextTokenIndex} of ${tokens} tokens`);
    }
    copy.push({ tokens, ms: saveMs + loadMs, bytes: fileSize });
  };

  try {
    // Warm-up: the first evaluation after loading pays one-off costs (buffers, page faults).
    await sequence.clearHistory();
    await run(random(Math.min(8, sizes[0]!)), Math.min(2, decodeTokens));

    const largest = sizes[sizes.length - 1]!;
    for (const n of sizes) {
      const timeDecode = decodeTokens > 0 && (n === sizes[0] || n === largest);
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(n); repeat++) {
        await sequence.clearHistory();
        const last = repeat === repeatsOf(n) - 1;
        const timed = await run(random(n), timeDecode && last ? decodeTokens : 0);
        best = Math.min(best, timed.prefillMs);
        if (timed.decodeMsPerToken !== undefined) {
          decode.push({ context: n + decodeTokens / 2, msPerToken: timed.decodeMsPerToken });
        }
      }
      prefill.push({ extend: n, context: n, ms: best });
      if (options.measureCopy !== false && (n === sizes[0] || n === largest)) await measureCopy();
    }

    // Prefills on top of the largest prompt, cached: the context terms of the model.
    const prefix = sequence.nextTokenIndex;
    for (const extend of WARM_EXTENDS.filter((e) => e < largest && prefix + e + 1 <= contextSize)) {
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(extend); repeat++) {
        best = Math.min(best, (await run(random(extend), 0)).prefillMs);
        await truncateTo(prefix);
      }
      prefill.push({ extend, context: prefix + extend, ms: best });
    }
  } finally {
    await rm(statePath, { force: true });
    await sequence.clearHistory();
  }
  return { prefill, decode, copy, stateDir, totalMs: performance.now() - started };
}

/** A generator of random ordinary tokens of the model (seeded, deterministic). */
function randomTokens(model: LlamaModel, seed: number): (count: number) => Token[] {
  const pool: Token[] = [];
  for (const token of model.iterateAllTokens()) {
    if (!model.isSpecialToken(token) && !model.isEogToken(token)) pool.push(token);
  }
  if (pool.length === 0) throw new Error("profile: the model has no ordinary tokens");
  let state = seed >>> 0;
  const next = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (count) => Array.from({ length: count }, () => pool[Math.floor(next() * pool.length)]!);
}
