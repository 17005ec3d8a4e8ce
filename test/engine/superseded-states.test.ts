// A worker's state store keeps one copy of a long shared prefix: a saved state drops the stored
// ones it holds nearly all of (state-store.ts), but never the state the next request is about
// to load. On real llama.cpp (tiny model), one slot, in both isolation modes.
import { describe, expect, it } from "vitest";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import { useTinyModel, useWorker } from "../helpers/tiny-worker.js";
import { workerInit } from "../helpers/worker-init.js";

const tiny = useTinyModel();
const greedy = (maxTokens: number) => ({ temperature: 0, stop: [] as string[], maxTokens });

describe.each<Isolation>(["thread", "process"])("a worker in %s isolation", (isolation) => {
  const worker = useWorker(() => workerInit(tiny.path(), { workerId: `superseded-${isolation}`, slots: 1, contextSize: 1024 }), isolation);

  it("keeps one state of two prompts that share all but their questions, and loads a conversation's state though the save before it supersedes it", async () => {
    const documentation = "the tool takes a city name and returns the weather there, in degrees and words. ".repeat(12);
    const question = (topic: string) => `${documentation} Now a question about ${topic}, asked with several words of its own here.`;
    const first = await tiny.prompt(question("rivers and their long bridges"));
    const second = await tiny.prompt(question("mountains and their cold peaks"));
    const third = await tiny.prompt(question("forests and their tall trees"));
    const before = await worker().stats();
    await worker().generate("first", first, greedy(6));
    // The slot's content (the first prompt and its answer) is saved as the second takes the slot,
    // and the second's as the third does: that save holds all of the first's state but its
    // question and answer, and the first's goes.
    for (const [id, prompt] of [
      ["second", second],
      ["third", third],
    ] as const)
      expect((await worker().generate(id, prompt, greedy(6))).spilledTokens).toBeGreaterThan(0);
    expect((await worker().stats()).storedStates - before.storedStates).toBe(1);
    // The second conversation goes on. The slot holds the third, which shares only the
    // documentation: the second's stored state is found, and kept while the slot's content is
    // saved, though that save holds all of it but its question and answer.
    const continued = new Int32Array([...second, ...(await tiny.prompt("and one more thing"))]);
    const c = await worker().generate("continued", continued, greedy(4));
    expect(c.spilledTokens).toBeGreaterThan(0);
    expect(c.restoredTokens).toBeGreaterThan(16);
    expect(c.cachedTokens).toBeGreaterThanOrEqual(second.length);
  });
});
