// A worker's context continues a prompt whose prefill has started before it starts one of a
// higher priority group (batch-priority.ts, started-prefills.ts): node-llama-cpp hands the
// batch rule fresh items with the evaluated part cut off, and the rule still knows them.
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { openTestContext, useLoadedModel, useTinyModel } from "../helpers/tiny-worker.js";

const tiny = useTinyModel();

describe("the prefill order in a worker's context", () => {
  const loaded = useLoadedModel(tiny.path);

  it("finishes a started low-priority prompt before a high-priority one queued after it starts", async () => {
    const chunk = 8;
    const batched = await openTestContext(loaded(), { chunkTokens: () => chunk });
    try {
      const words = (count: number, word: string) => Array.from({ length: count }, (_, i) => `${word}${i % 7}`).join(" ");
      const cold = loaded().tokenize(words(200, "river")).slice(0, 240) as Token[];
      const cached = loaded().tokenize(words(40, "stone")).slice(0, 40) as Token[];
      expect(cold.length).toBe(240);
      const firstTokens: string[] = [];
      const firstToken = async (name: string, slot: number, tokens: Token[], evaluationPriority: 1 | 5) => {
        for await (const _ of batched.sequences[slot]!.evaluate(tokens, { temperature: 0, evaluationPriority })) {
          firstTokens.push(name);
          break;
        }
      };
      const coldDone = firstToken("cold", 0, cold, 1);
      // Queue the high-priority prompt once the cold one has had a chunk, long before its end.
      while (batched.batches.prefillTokens === 0) await new Promise((resolve) => setImmediate(resolve));
      const evaluatedBefore = batched.batches.prefillTokens;
      const cachedDone = firstToken("cached", 1, cached, 5);
      await Promise.all([coldDone, cachedDone]);
      // More than the cached prompt's whole prefill was left of the cold one when it was queued.
      expect(cold.length - evaluatedBefore).toBeGreaterThan(cached.length + chunk);
      expect(firstTokens).toEqual(["cold", "cached"]);
    } finally {
      await batched.context.dispose();
    }
  });
});
