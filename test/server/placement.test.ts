// Placement through the real server with two tiny-model workers: conversations stick to the
// worker holding their prefix (and report it cached), bursts of distinct prompts spread.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

for (const policy of ["preble", "shape"] as const) {
  describe(`policy ${policy}`, () => {
    let server: TestServer;

    beforeAll(async () => {
      server = await startTestServer({ workers: 2, slots: 2, policy });
    });

    afterAll(async () => {
      await server?.close();
    });

    it("keeps every turn of a conversation on its first worker, with the history cached", async () => {
      const messages: { role: "system" | "user" | "assistant"; content: string }[] = [
        { role: "system", content: `agent ${randomUUID()}\n${"the tool lists the files and their sizes ".repeat(40)}` },
      ];
      let firstWorker: string | undefined;
      let previousPrompt = 0;
      for (let turn = 1; turn <= 4; turn++) {
        messages.push({ role: "user", content: `step ${turn}: run the next tool` });
        const { data, response } = await server.client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 6, temperature: 0 }).withResponse();
        const worker = response.headers.get("x-radixgate-worker")!;
        const placement = response.headers.get("x-radixgate-placement")!;
        firstWorker ??= worker;
        expect(worker).toBe(firstWorker);
        if (turn > 1) {
          expect(data.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(previousPrompt - 3);
          expect(placement).toMatch(policy === "preble" ? /^exploit;matched=\d+$/ : /^continuation;matched=\d+$/);
          expect(Number(placement.split("matched=")[1])).toBeGreaterThanOrEqual(previousPrompt - 3);
        }
        previousPrompt = data.usage!.prompt_tokens;
        messages.push({ role: "assistant", content: data.choices[0]!.message.content! });
      }
    });

    it("spreads a burst of distinct prompts over both workers", async () => {
      const burst = await Promise.all(
        // Twice the conversation's six turns: preble's window still holds that conversation's
        // work on its worker, so the burst fills the other worker first and spills over only once
        // that one's load passes it (how soon depends on the machine's calibrated speeds).
        Array.from({ length: 12 }, (_, i) =>
          server.client.chat.completions
            .create({ model: TINY_MODEL, messages: [{ role: "user", content: `question ${i} ${randomUUID()}` }], max_tokens: 24 })
            .withResponse(),
        ),
      );
      const workers = burst.map(({ response }) => response.headers.get("x-radixgate-worker"));
      expect(new Set(workers)).toEqual(new Set(["w0", "w1"]));
      // Distinct prompts share only the chat template's first tokens: preble's rule explores
      // (the cheapest worker by load), shape spreads them as one-shot questions.
      const reasons = burst.map(({ response }) => response.headers.get("x-radixgate-placement")!.split(";")[0]);
      expect(new Set(reasons)).toEqual(new Set([policy === "preble" ? "explore" : "spread"]));
      // shape spreads one-shot requests with a counter: an even split. preble weighs each
      // worker's load over its window, which here includes the conversation above, so its
      // split follows the work already done, not the count.
      if (policy === "shape") for (const id of ["w0", "w1"]) expect(workers.filter((worker) => worker === id)).toHaveLength(6);
    });
  });
}
