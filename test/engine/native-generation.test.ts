// Plain requests generate several steps per call into the addon's loop (worker/native-
// generation.ts), in both isolation modes: the same tokens and text as node-llama-cpp's
// LlamaCompletion gives them (a worker started with RADIXGATE_NO_NATIVE_GENERATION=1), stop
// sequences and cancellation included, several sequences sharing each step, and the requests
// the loop cannot serve (a grammar, token probabilities, penalties) left on LlamaCompletion.
import type { Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerationResult } from "../../src/contract/generation.js";
import type { SamplingParams } from "../../src/contract/sampling.js";
import type { Isolation, WorkerHandle } from "../../src/engine/host/worker-handle.js";
import { startWorker, useLoadedModel, useTinyModel } from "../helpers/tiny-worker.js";
import { workerInit } from "../helpers/worker-init.js";

const tiny = useTinyModel();
const loaded = useLoadedModel(tiny.path);
const greedy = (maxTokens: number, stop: string[] = []): SamplingParams => ({ temperature: 0, stop, maxTokens });

describe.each<Isolation>(["thread", "process"])("a worker in %s isolation", (isolation) => {
  let native: WorkerHandle;
  let completion: WorkerHandle;
  beforeAll(async () => {
    native = await startWorker(workerInit(tiny.path(), { workerId: `native-${isolation}`, slots: 3, threads: 1 }), isolation);
    const init = workerInit(tiny.path(), { workerId: `completion-${isolation}`, slots: 3, threads: 1 });
    completion = await startWorker(init, isolation, { RADIXGATE_NO_NATIVE_GENERATION: "1" });
  });
  afterAll(async () => {
    await Promise.all([native?.close(), completion?.close()]);
  });

  const both = async (id: string, text: string, sampling: SamplingParams): Promise<[GenerationResult, GenerationResult]> => {
    const tokens = await tiny.prompt(text);
    return [await native.generate(`${id}-native`, tokens, sampling), await completion.generate(`${id}-completion`, tokens, sampling)];
  };

  it("generates what LlamaCompletion generates, in the loop", async () => {
    expect(native.info?.nativeGeneration, native.info?.nativeGenerationProblem).toBe(true);
    expect(completion.info?.nativeGeneration).toBe(false);
    expect(completion.info?.nativeGenerationProblem).toBe("RADIXGATE_NO_NATIVE_GENERATION=1");
    const before = await native.stats();
    const [ours, theirs] = await both("same", "tell me a long story about a lighthouse", greedy(120));
    const after = await native.stats();
    expect(ours.text).toBe(theirs.text);
    expect(ours.completionTokens).toBe(theirs.completionTokens);
    expect(ours.finishReason).toBe(theirs.finishReason);
    // The slot holds what LlamaCompletion's would: the prompt and every token but the last.
    expect(ours.heldAnswerTokens).toEqual(theirs.heldAnswerTokens);
    // All but the first token came from the loop, several steps per call.
    expect(after.nativeTokens! - before.nativeTokens!).toBe(ours.completionTokens - 1);
    expect(after.nativeCalls! - before.nativeCalls!).toBeLessThan(after.nativeSteps! - before.nativeSteps!);
  });

  it("stops at a stop sequence where LlamaCompletion stops", async () => {
    const [plain] = await both("probe", "name three rivers and describe them", greedy(80));
    // A word from the middle of the answer.
    const word = plain.text.split(/\s+/).filter((w) => w.length >= 3)[4]!;
    const [ours, theirs] = await both("stop", "name three rivers and describe them", greedy(80, [word]));
    expect(ours.finishReason).toBe("stop");
    expect(ours.text).toBe(theirs.text);
    expect(ours.text).not.toContain(word);
    expect(ours.completionTokens).toBeLessThan(plain.completionTokens);
  });

  it("samples the same tokens again for the same seed", async () => {
    const seeded: SamplingParams = { temperature: 0.9, topP: 0.9, seed: 1234, stop: [], maxTokens: 60 };
    const tokens = await tiny.prompt("invent a word and define it");
    const first = await native.generate("seed-1", tokens, seeded);
    const second = await native.generate("seed-2", tokens, seeded);
    const other = await native.generate("seed-3", tokens, { ...seeded, seed: 99 });
    expect(second.text).toBe(first.text);
    expect(other.text).not.toBe(first.text);
  });

  it("decodes every generating sequence in each step of the loop", async () => {
    const prompts = await Promise.all(["one", "two", "three"].map((name) => tiny.prompt(`a long list of ${name}s`)));
    const before = await native.stats();
    const together = await Promise.all(prompts.map((tokens, i) => native.generate(`together-${i}`, tokens, greedy(200))));
    const after = await native.stats();
    // (Not compared with LlamaCompletion's text: which sequences share a step changes the
    // matrix kernels llama.cpp picks, and so the last bits of the logits, on either path.)
    expect(together.map((result) => result.completionTokens)).toEqual([200, 200, 200]);
    // Each text is what its slot holds (every generated token but the last), spelled after its
    // prompt: the text of one sequence's tokens, not another's or an earlier call's.
    together.forEach((result, i) => {
      const held = result.heldAnswerTokens as Token[];
      expect(held).toHaveLength(199);
      expect(result.text.startsWith(loaded().detokenize(held, false, Array.from(prompts[i]!) as Token[]))).toBe(true);
    });
    const tokens = after.nativeTokens! - before.nativeTokens!;
    const steps = after.nativeSteps! - before.nativeSteps!;
    // Three sequences of 199 loop tokens each. Each joins the loop's steps at its next call
    // once its own first token is out, so some steps carry fewer: one token per step would be 597.
    expect(tokens).toBe(3 * 199);
    expect(steps).toBeLessThan(tokens * 0.8);
  });

  it("stops a request cancelled while it generates, and the worker goes on", async () => {
    const tokens = await tiny.prompt("count to a thousand");
    const cancel = new AbortController();
    let texts = 0;
    const cancelled = await native.generate("cancel-me", tokens, greedy(2000), {
      signal: cancel.signal,
      onText: () => {
        if (++texts === 5) cancel.abort();
      },
    });
    expect(cancelled.finishReason).toBe("cancelled");
    expect(cancelled.completionTokens).toBeLessThan(2000);
    const [ours, theirs] = await both("after-cancel", "count to ten", greedy(30));
    expect(ours.text).toBe(theirs.text);
  });

  it("leaves requests with a grammar or token probabilities on LlamaCompletion", async () => {
    const tokens = await tiny.prompt("answer in json");
    const before = await native.stats();
    const json = await native.generate("grammar", tokens, { ...greedy(20), responseFormat: { type: "json_object" } });
    const probabilities = await native.generate("logprobs", tokens, { ...greedy(20), logprobs: 2 });
    const penalised = await native.generate("penalty", tokens, { ...greedy(20), frequencyPenalty: 0.5 });
    const after = await native.stats();
    expect([json, probabilities, penalised].map((result) => result.completionTokens > 0)).toEqual([true, true, true]);
    expect(after.nativeTokens).toBe(before.nativeTokens);
  });
});
