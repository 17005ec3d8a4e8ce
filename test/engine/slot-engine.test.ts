// The worker engine under concurrency, on real llama.cpp (tiny model), in both isolation
// modes: a request given a slot that holds other tokens starts while the worker's other
// sequences keep decoding (no wait for them to finish), and a decode step carries every
// generating sequence.
import { describe, expect, it } from "vitest";
import type { Isolation, WorkerHandle } from "../../src/engine/host/worker-handle.js";
import type { GenerationResult } from "../../src/contract/generation.js";
import { useTinyModel, useWorker } from "../helpers/tiny-worker.js";
import { workerInit } from "../helpers/worker-init.js";

const tiny = useTinyModel();
const prompt = tiny.prompt;

const greedy = (maxTokens: number) => ({ temperature: 0, stop: [] as string[], maxTokens });

/** A generation with the moments its events arrived, in the order of a shared log. */
function tracked(worker: WorkerHandle, id: string, tokens: Int32Array, maxTokens: number, log: string[]) {
  let firstText = false;
  const result = worker.generate(id, tokens, greedy(maxTokens), {
    onText: () => {
      if (firstText) return;
      firstText = true;
      log.push(`${id} first text`);
    },
  });
  return result.then((done: GenerationResult) => {
    log.push(`${id} done`);
    return done;
  });
}

describe.each<Isolation>(["thread", "process"])("a worker in %s isolation", (isolation) => {
  // Spill on, with a low bar: a used slot's old content is saved (a state save under the
  // context lock) before the new request erases it.
  const worker = useWorker(() => workerInit(tiny.path(), { workerId: `stall-${isolation}`, slots: 3, contextSize: 2048 }), isolation);

  it("starts a request on a used slot while two other sequences keep decoding", async () => {
    // Every slot holds an old conversation (LRU gives each its own slot).
    for (const topic of ["apples", "bridges", "comets"]) await worker().generate(`old-${topic}`, await prompt(`old talk about ${topic} `.repeat(8)), greedy(4));
    const log: string[] = [];
    // Two long generations take two of the used slots (an erase each)...
    const first = tracked(worker(), "long-a", await prompt("first long answer please"), 1500, log);
    const second = tracked(worker(), "long-b", await prompt("second long answer please"), 1500, log);
    while (!(log.includes("long-a first text") && log.includes("long-b first text"))) await new Promise((resolve) => setTimeout(resolve, 5));
    // ...and a third request must erase (and spill) the last slot's old content while they decode.
    const newcomer = tracked(worker(), "new", await prompt("a new question arrives now"), 4, log);
    const [a, b, c] = await Promise.all([first, second, newcomer]);
    expect(c.evictedTokens).toBeGreaterThan(0);
    expect(c.spilledTokens).toBeGreaterThan(0);
    // It got its answer while both long generations were still running.
    expect(log.indexOf("new done")).toBeLessThan(log.indexOf("long-a done"));
    expect(log.indexOf("new done")).toBeLessThan(log.indexOf("long-b done"));
    expect([a.completionTokens, b.completionTokens]).toEqual([1500, 1500]);
  });

  it("puts every generating sequence's next token in each decode step", async () => {
    const before = await worker().stats();
    // Counted from when all three are generating to when the first ends: the steps where all
    // three could share (the prompts' steps and a ragged start, a few milliseconds of steps
    // for whichever started first, left out).
    const started = new Set<string>();
    let allStarted: () => void = () => {};
    const allGenerating = new Promise<void>((resolve) => (allStarted = resolve));
    const results = ["one", "two", "three"].map(async (name) =>
      worker().generate(`batch-${name}`, await prompt(`batch ${name}`), greedy(400), {
        onText: () => {
          started.add(name);
          if (started.size === 3) allStarted();
        },
      }),
    );
    await allGenerating;
    const fromAllGenerating = await worker().stats();
    await Promise.race(results);
    const toFirstEnd = await worker().stats();
    const [a, b, c] = await Promise.all(results);
    const after = await worker().stats();
    const steps = toFirstEnd.steps - fromAllGenerating.steps;
    const decoded = toFirstEnd.decodeTokens - fromAllGenerating.decodeTokens;
    expect(a!.completionTokens + b!.completionTokens + c!.completionTokens).toBe(1200);
    // Three sequences side by side: three tokens in each step; one at a time would be one.
    expect(steps).toBeGreaterThan(50);
    expect(decoded / steps).toBeGreaterThan(2.5);
    // The gate that holds each step for the late sequence is told when one queues (our patch
    // to node-llama-cpp): it wakes on its own only when a wait limit passes, not on every
    // event-loop turn while it waits (a busy loop that took a core from llama.cpp).
    expect(after.gateWakeups! - before.gateWakeups!).toBeLessThan((after.steps - before.steps) / 10);
  });
});
