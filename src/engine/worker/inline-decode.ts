// Generation steps decoded on the worker's own thread.
//
// node-llama-cpp 3.21.1 decodes every batch as an N-API async worker (LlamaContext's
// dispatchPendingBatch awaits `this._ctx.decodeBatch()`, AddonContextDecodeBatchWorker in
// llama/addon/AddonContext.cpp of the package): the batch is handed to a thread of libuv's
// pool and its end handed back. A generation step of one to a few sequences takes a few
// milliseconds on a CPU, and the hand-offs are a share of it that grows when other threads
// want the cores too: on the 2-core development box a served worker with two llama.cpp
// threads decoded 1.14-1.60x as many tokens per second when its own thread called
// llama_decode, and the loop alone 2-12 % more with one thread (docs/engine.md, "Decoding
// on the worker's thread"). This replaces the context object's `decodeBatch` (on that one object:
// node-llama-cpp's class is untouched) with one that decodes a batch of at most `maxTokens`
// on the calling thread through the llama-context addon, and hands larger ones (prompt
// evaluation, hundreds of milliseconds on a CPU) to node-llama-cpp's own path, so that the
// worker's thread stays free for the host's messages while a prompt is evaluated. The
// event loop turns once before every batch is formed (batch-gate.ts), so a new request read
// there joins it, and a cancellation is taken between two steps. That holds only because the
// gate decides every dispatch: node-llama-cpp 3.21.1 dispatched at once, without asking its
// schedule, when every sequence of the context had queued (`_scheduleDecode` in
// LlamaContext.js; our patch makes it ask), and with the step decoded and its tokens sampled
// on this thread a worker whose slots were all generating then ran from step to step in
// promise callbacks and never read a message (measured: a request past its deadline
// generated 1,900 tokens after the cancel was sent).
//
// Each generating sequence's token is sampled on the worker's thread too (inline-sample.cpp
// of the addon: node-llama-cpp's own sampler calls, made here instead of on libuv's pool),
// unless the request asked for the candidates' probabilities, which node-llama-cpp's call
// returns. node-llama-cpp awaits every sampling of a step before it releases the context
// lock, so the logits a sampling reads are never overwritten meanwhile, on either path.
// RADIXGATE_NO_INLINE_SAMPLE=1 keeps node-llama-cpp's sampling (decoding stays inline).
//
// Without the addon (not built: scripts/build-native.mjs says why), or with
// RADIXGATE_NO_INLINE_DECODE=1, every batch takes node-llama-cpp's path, and the worker says
// why. To drop this when node-llama-cpp decodes on the calling thread itself: delete this
// file and its call in batched-context.ts, and inline-decode.cpp from the addon.
import type { LlamaContext } from "node-llama-cpp";
import { type ContextAddon, contextAddon } from "./context-addon.js";

export interface InlineDecode {
  /** Whether small batches are decoded on the worker's thread. */
  readonly on: boolean;
  /** Why not, when they are not. */
  readonly reason?: string;
  /** Why the tokens of inline steps are sampled through node-llama-cpp's call instead, when they are. */
  readonly samplingProblem?: string;
  /** Batches decoded on the worker's thread so far, and handed to node-llama-cpp's path; tokens sampled on the worker's thread. */
  readonly steps: { inline: number; handedOff: number; sampled: number };
}

/** node-llama-cpp's native context object: the one method this replaces. */
interface AddonContextObject {
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: unknown, probabilities?: boolean, confidence?: boolean): Promise<unknown>;
}

/**
 * Makes the context decode its batches of at most `maxTokens` tokens (a generation step: one
 * token per sequence is at most the context's sequence count) on the calling thread. Call
 * once, right after the context is created.
 */
export function decodeStepsInline(context: LlamaContext, maxTokens: number): InlineDecode {
  const steps = { inline: 0, handedOff: 0, sampled: 0 };
  if (process.env.RADIXGATE_NO_INLINE_DECODE === "1") return { on: false, reason: "RADIXGATE_NO_INLINE_DECODE=1", steps };
  const found = contextAddon();
  if ("problem" in found) return { on: false, reason: found.problem, steps };
  const { addon } = found;
  // node-llama-cpp keeps its native context object here (a private field of 3.21.1's
  // LlamaContext; the addon checks that the object is node-llama-cpp's before using it).
  const addonContext = (context as unknown as { _ctx: AddonContextObject })._ctx;
  let decoder: unknown;
  try {
    decoder = addon.inlineDecoder(addonContext);
  } catch (error) {
    return { on: false, reason: (error as Error).message, steps };
  }
  const handOff = addonContext.decodeBatch.bind(addonContext);
  const decodeBatch = (): Promise<void> => {
    if (addon.batchTokens(decoder) > maxTokens) {
      steps.handedOff++;
      return handOff();
    }
    steps.inline++;
    try {
      addon.decode(decoder);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  };
  // The class's methods are read-only properties of its prototype: define this object's own.
  Object.defineProperty(addonContext, "decodeBatch", { value: decodeBatch, configurable: true });
  const samplingProblem = sampleInline(addon, addonContext, steps);
  return { on: true, steps, ...(samplingProblem === undefined ? {} : { samplingProblem }) };
}

/** Makes the context sample plain tokens on the calling thread; or why not (node-llama-cpp's
 *  sampling then stays, `steps.sampled` at 0). */
function sampleInline(addon: ContextAddon, addonContext: AddonContextObject, steps: { sampled: number }): string | undefined {
  if (process.env.RADIXGATE_NO_INLINE_SAMPLE === "1") return "RADIXGATE_NO_INLINE_SAMPLE=1";
  // An addon built before this part existed (its sources changed and scripts/build-native.mjs has not run since).
  if (addon.inlineSampler === undefined) return "the llama-context addon predates inline sampling: run npm run build:native";
  let sampler: unknown;
  try {
    sampler = addon.inlineSampler(addonContext);
  } catch (error) {
    return (error as Error).message;
  }
  const sampleOnPool = addonContext.sampleToken.bind(addonContext);
  // Per token: no rest parameters (an array each call).
  const sampleToken = (batchLogitIndex: number, addonSampler: unknown, probabilities?: boolean, confidence?: boolean): Promise<unknown> => {
    // Probabilities or confidence asked for: node-llama-cpp's call returns them with the token.
    if (probabilities !== undefined) return sampleOnPool(batchLogitIndex, addonSampler, probabilities, confidence);
    steps.sampled++;
    try {
      return Promise.resolve(addon.sample(sampler, batchLogitIndex, addonSampler));
    } catch (error) {
      return Promise.reject(error);
    }
  };
  Object.defineProperty(addonContext, "sampleToken", { value: sampleToken, configurable: true });
  return undefined;
}
