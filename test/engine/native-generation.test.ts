// Plain requests generate several steps per call into the addon's loop (worker/native-
// generation.ts), in both isolation modes: the same tokens and text as node-llama-cpp's
// LlamaCompletion gives them (a worker started with RADIXGATE_NO_NATIVE_GENERATION=1), stop
// sequences and cancellation included, several sequences sharing each step, and the requests
// the loop cannot serve (a grammar, token probabilities, penalties) left on LlamaCompletion;
// and how long its calls run: long in a quiet worker, ended by the host's messages (a thread
// worker's attention word, a process worker's IPC channel), by a run's end, and short while
// anything else is on its way.
import { closeSync, openSync } from "node:fs";
import { Worker } from "node:worker_threads";
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerationResult } from "../../src/contract/generation.js";
import type { SamplingParams } from "../../src/contract/sampling.js";
import type { Isolation, WorkerHandle } from "../../src/engine/host/worker-handle.js";
import type { WorkerAttention } from "../../src/engine/worker/native-generation.js";
import { openTestContext, startWorker, useLoadedModel, useTinyModel } from "../helpers/tiny-worker.js";
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
    // Counted to the token that completed the stop sequence, not to the end of the loop's call.
    expect(ours.completionTokens).toBe(theirs.completionTokens);
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

  it("runs long calls while its every generation is in the loop, ended by the host's messages", async () => {
    const tokens = await tiny.prompt("count to a thousand, slowly");
    const before = await native.stats();
    let done = false;
    const running = native.generate("quiet", tokens, greedy(600)).finally(() => (done = true));
    // Each of these messages raises a thread worker's attention word, or waits in a process worker's IPC channel.
    while (!done) await native.stats();
    expect((await running).completionTokens).toBe(600);
    const after = await native.stats();
    expect(after.nativeQuietCalls! - before.nativeQuietCalls!).toBeGreaterThan(0);
    expect(after.nativeInterruptedCalls! - before.nativeInterruptedCalls!).toBeGreaterThan(0);
  });

  it("keeps its calls short while a request beside the loop runs on LlamaCompletion", async () => {
    const before = await native.stats();
    let started!: () => void;
    const besideStarted = new Promise<void>((resolve) => (started = resolve));
    // Token probabilities keep it on LlamaCompletion: each of its tokens needs a batch between the loop's calls.
    const beside = native.generate("beside", await tiny.prompt("list every colour you know"), { ...greedy(400), logprobs: 1 }, { onText: () => started() });
    await besideStarted;
    const inLoop = await native.generate("in-loop", await tiny.prompt("count to fifty"), greedy(60));
    const besideResult = await beside;
    const after = await native.stats();
    expect([inLoop.completionTokens, besideResult.completionTokens]).toEqual([60, 400]);
    expect(after.nativeTokens! - before.nativeTokens!).toBe(59);
    // (The loop's run ended long before the other's 400 tokens: it never ran alone.)
    expect(after.nativeQuietCalls! - before.nativeQuietCalls!).toBe(0);
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

describe("the loop's calls in the worker's thread", () => {
  const open = (attention?: WorkerAttention) => openTestContext(loaded(), { attention });
  type Loop = Exclude<Awaited<ReturnType<typeof open>>["nativeGeneration"], { problem: string }>;
  /** A greedy run of `budget` tokens in `slot`, started as the worker starts one: announced, its first token from node-llama-cpp. */
  const runOf = async (loop: Loop, sequence: LlamaContextSequence, slot: number, budget: number, onTokens: (tokens: readonly Token[]) => void = () => {}) => {
    const joined = loop.announce(slot);
    const evaluation = sequence.evaluate(loaded().tokenize(`Once upon a time, robot ${slot}`) as Token[], { temperature: 0, yieldEogToken: true });
    const first = (await evaluation.next()).value as Token;
    await evaluation.return();
    return { sequence, sequenceId: slot, firstToken: first, budget, temperature: 0, topP: 0.95, seed: 1, onTokens, cancelled: () => false, joined };
  };
  /** Generates `count` tokens greedily in the loop; the calls and steps it took. */
  const generate = async (attention?: WorkerAttention, count = 300) => {
    const { context, sequences, nativeGeneration } = await open(attention);
    try {
      if ("problem" in nativeGeneration) throw new Error(nativeGeneration.problem);
      expect(await nativeGeneration.run(await runOf(nativeGeneration, sequences[0]!, 0, count))).toBe("maxTokens");
      return nativeGeneration.stats;
    } finally {
      await context.dispose();
    }
  };

  it("hands a run back at the step it ends, while the others go on", async () => {
    const { context, sequences, nativeGeneration } = await open();
    try {
      if ("problem" in nativeGeneration) throw new Error(nativeGeneration.problem);
      let longTokens = 0;
      const deliveries: number[] = [];
      const short = await runOf(nativeGeneration, sequences[0]!, 0, 5);
      const long = await runOf(nativeGeneration, sequences[1]!, 1, 300, (tokens) => {
        longTokens += tokens.length;
        deliveries.push(tokens.length);
      });
      // Both join the loop's first call (one step: they were announced), then share steps until the short one ends.
      const longDone = nativeGeneration.run(long);
      await nativeGeneration.run(short);
      // A call runs many steps of this model within its 4 ms; it ended with the short run's fifth.
      expect(longTokens).toBe(5);
      // The first call's one token came back on its own: a new run's second token goes out at once.
      expect(deliveries[0]).toBe(1);
      await longDone;
      expect(longTokens).toBe(300);
    } finally {
      await context.dispose();
    }
  });

  it("ends a long call after the step during which another thread raised the attention word", async () => {
    // Without a word the calls are short but run several steps each.
    const short = await generate();
    expect(short.quietCalls).toBe(0);
    expect(short.steps).toBeGreaterThan(short.calls * 2);
    // A quiet loop whose word another thread keeps raising: one step per call.
    const attention = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    const stopRaising = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    const raiser = new Worker(
      "const { workerData: [word, stop] } = require('node:worker_threads'); while (Atomics.load(stop, 0) === 0) Atomics.store(word, 0, 1);",
      { eval: true, workerData: [attention, stopRaising] },
    );
    try {
      // Started once it raised the word the first time.
      while (Atomics.load(attention, 0) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const raised = await generate({ word: attention });
      // Every call but the run's first (one step, as for any new run).
      expect(raised.quietCalls).toBe(raised.calls - 1);
      expect(raised.steps).toBe(300);
      // (A call that starts before the raising thread's next store may run a second step.)
      expect(raised.steps).toBeLessThan(raised.calls * 1.5);
    } finally {
      Atomics.store(stopRaising, 0, 1);
      await raiser.terminate();
    }
  });

  it("ends a long call after the step during which its channel's descriptor was readable", async () => {
    // /dev/null always polls readable: as a channel with a message always waiting.
    const channelFd = openSync("/dev/null", "r");
    try {
      const waiting = await generate({ channelFd });
      expect(waiting.quietCalls).toBe(waiting.calls - 1);
      expect(waiting.steps).toBe(300);
      expect(waiting.calls).toBe(300);
    } finally {
      closeSync(channelFd);
    }
  });
});
