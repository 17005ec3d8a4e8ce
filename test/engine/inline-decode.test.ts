// A worker decodes its generation steps on its own thread through the llama-context addon
// (worker/inline-decode.ts), in both isolation modes, and hands prompt batches to node-llama-
// cpp's async decode; the tokens are the same either way, and a step llama.cpp refuses
// rejects its generation as node-llama-cpp's path does, with the context still usable.
import { createRequire } from "node:module";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import { CONTEXT_ADDON_DIR, type ContextAddon } from "../../src/engine/worker/context-addon.js";
import { openTestContext, useLoadedModel, useTinyModel, useWorker } from "../helpers/tiny-worker.js";
import { workerInit } from "../helpers/worker-init.js";

const tiny = useTinyModel();

describe.each<Isolation>(["thread", "process"])("a worker in %s isolation", (isolation) => {
  // Plain requests generate in the native loop (native-generation.test.ts): this one keeps
  // node-llama-cpp's steps, as requests with a grammar or probabilities do.
  const worker = useWorker(() => workerInit(tiny.path(), { workerId: `inline-${isolation}`, slots: 2, threads: 2 }), isolation, {
    RADIXGATE_NO_NATIVE_GENERATION: "1",
  });

  it("decodes its generation steps on its own thread and hands the prompt's batch off", async () => {
    expect(worker().info?.inlineDecode, worker().info?.inlineDecodeProblem).toBe(true);
    expect(worker().info?.inlineSampleProblem).toBeUndefined();
    const before = await worker().stats();
    const tokens = await tiny.prompt("count slowly");
    const result = await worker().generate("inline", tokens, { temperature: 0, stop: [], maxTokens: 40 }, {});
    const after = await worker().stats();
    expect(result.completionTokens).toBe(40);
    const inline = after.inlineSteps! - before.inlineSteps!;
    const steps = after.steps - before.steps;
    // Every step after the prompt's carries one generated token (at most `slots` tokens).
    expect(inline).toBeGreaterThanOrEqual(39);
    // The prompt (more tokens than slots) went through node-llama-cpp's own decode.
    expect(steps - inline).toBeGreaterThanOrEqual(1);
    // Each generated token was sampled on the worker's thread too.
    expect(after.inlineSamples! - before.inlineSamples!).toBe(40);
  });
});

describe("inline decode in one context", () => {
  const loaded = useLoadedModel(tiny.path);

  const open = async (env?: string) => {
    if (env !== undefined) process.env.RADIXGATE_NO_INLINE_DECODE = env;
    try {
      return await openTestContext(loaded(), { contextSize: 512 });
    } finally {
      delete process.env.RADIXGATE_NO_INLINE_DECODE;
    }
  };
  type Sampling = { temperature: number; seed?: number; topP?: number; topK?: number };
  const sampled = async (sequence: { evaluate: (tokens: Token[], options: Sampling) => AsyncGenerator<Token> }, count: number, sampling: Sampling) => {
    const out: Token[] = [];
    const prompt = loaded().tokenize("Once upon a time, a small robot") as Token[];
    for await (const token of sequence.evaluate(prompt, sampling)) if (out.push(token) >= count) break;
    return out;
  };
  const greedy = (sequence: Parameters<typeof sampled>[0], count: number) => sampled(sequence, count, { temperature: 0 });

  it("gives the same tokens as node-llama-cpp's async decode, which RADIXGATE_NO_INLINE_DECODE=1 keeps", async () => {
    const inline = await open();
    const offloaded = await open("1");
    try {
      expect(inline.inlineDecode.on).toBe(true);
      expect(offloaded.inlineDecode).toMatchObject({ on: false, reason: "RADIXGATE_NO_INLINE_DECODE=1" });
      const a = await greedy(inline.sequences[0]!, 30);
      const b = await greedy(offloaded.sequences[0]!, 30);
      expect(a).toEqual(b);
      expect(inline.inlineDecode.steps.inline).toBeGreaterThanOrEqual(29);
      expect(inline.inlineDecode.steps.handedOff).toBeGreaterThanOrEqual(1);
      expect(inline.inlineDecode.steps.sampled).toBe(30);
      expect(offloaded.inlineDecode.steps).toEqual({ inline: 0, handedOff: 0, sampled: 0 });
    } finally {
      await inline.context.dispose();
      await offloaded.context.dispose();
    }
  });

  it("says why its tokens are sampled through node-llama-cpp's call when RADIXGATE_NO_INLINE_SAMPLE=1, and still decodes inline", async () => {
    process.env.RADIXGATE_NO_INLINE_SAMPLE = "1";
    let pooled: Awaited<ReturnType<typeof open>>;
    try {
      pooled = await open();
    } finally {
      delete process.env.RADIXGATE_NO_INLINE_SAMPLE;
    }
    try {
      expect(pooled.inlineDecode.samplingProblem).toBe("RADIXGATE_NO_INLINE_SAMPLE=1");
      expect((await greedy(pooled.sequences[0]!, 10)).length).toBe(10);
      expect(pooled.inlineDecode.steps.sampled).toBe(0);
      expect(pooled.inlineDecode.steps.inline).toBeGreaterThanOrEqual(9);
    } finally {
      await pooled.context.dispose();
    }
  });

  it("samples on its thread what node-llama-cpp's own sampling picks: seeded temperature, top-p and top-k", async () => {
    const inline = await open();
    const offloaded = await open("1");
    try {
      const sampling = { temperature: 0.9, seed: 7, topP: 0.9, topK: 20 };
      const a = await sampled(inline.sequences[0]!, 40, sampling);
      const b = await sampled(offloaded.sequences[0]!, 40, sampling);
      expect(a).toEqual(b);
      // A random model at this temperature does not repeat one token: the seed drove the picks.
      expect(new Set(a).size).toBeGreaterThan(5);
      expect(inline.inlineDecode.steps.sampled).toBe(40);
      expect(offloaded.inlineDecode.steps.sampled).toBe(0);
      expect(inline.inlineDecode.samplingProblem).toBeUndefined();
    } finally {
      await inline.context.dispose();
      await offloaded.context.dispose();
    }
  });

  it.each([
    ["inline", undefined],
    ["handed off", "1"],
  ])("rejects a step llama.cpp refuses (%s) with node-llama-cpp's message, and the context goes on", async (_mode, env) => {
    const { context, sequences, inlineDecode } = await open(env);
    try {
      // One token (a generation-sized batch) that is not in the vocabulary: llama_decode refuses the batch.
      const outOfVocabulary = 2 ** 30;
      const refused = (async () => {
        for await (const _token of sequences[0]!.evaluate([outOfVocabulary as Token], { temperature: 0 })) break;
      })();
      await expect(refused).rejects.toThrow(/Eval has failed/);
      expect(inlineDecode.steps.inline).toBe(env === undefined ? 1 : 0);
      expect(await greedy(sequences[1]!, 5)).toHaveLength(5);
    } finally {
      await context.dispose();
    }
  });
});

describe("the addon's inline decoder", () => {
  const manifest = JSON.parse(readFileSync(join(CONTEXT_ADDON_DIR, "current.json"), "utf8")) as { file: string };
  const addon = createRequire(import.meta.url)(join(CONTEXT_ADDON_DIR, manifest.file)) as ContextAddon;

  it("refuses what is not a node-llama-cpp context, and a handle it did not make", () => {
    expect(() => addon.inlineDecoder({})).toThrow(/not a node-llama-cpp context: the object wraps nothing/);
    expect(() => addon.inlineDecoder(undefined)).toThrow(/not a node-llama-cpp context/);
    expect(() => addon.decode({})).toThrow(/not a decoder handle/);
    expect(() => addon.batchTokens(undefined)).toThrow(/not a decoder handle/);
    expect(() => addon.inlineSampler!({})).toThrow(/not a node-llama-cpp context: the object wraps nothing/);
    expect(() => addon.sample({}, 0, {})).toThrow(/not a sampler handle/);
  });
});
