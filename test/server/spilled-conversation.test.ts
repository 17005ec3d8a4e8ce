// An agent's history that left its worker's slot is still on that worker: in its state store.
// The worker reports what it saves and drops, and preble sends the next turn back there to
// load it, instead of exploring and computing the whole history on another worker. Two
// workers of one slot each, in thread workers (the default) and process workers; the
// llama-server engine keeps no state store of ours.
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { salted } from "../helpers/salt.js";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** The scheduler's count of stored states it knows of, from GET /metrics. */
async function storedStatesSeen(server: TestServer): Promise<number> {
  const text = await (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
  return Number(/^radixgate_scheduler_state_entries\{kind="storedStates"\} (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

for (const isolation of ["thread", "process"] as const) {
  describe(`a conversation spilled from its slot (${isolation} workers)`, () => {
    let server: TestServer;

    beforeAll(async () => {
      server = await startTestServer({ workers: 2, slots: 1, policy: "preble", isolation, scheduler: { sessionPinning: false } });
    });

    afterAll(async () => {
      await server?.close();
    });

    it("goes back to the worker whose store holds its history, and loads it there", async () => {
      const chat = async (messages: Message[], worker?: string) => {
        const { data, response } = await server.client.chat.completions
          .create({ model: TINY_MODEL, messages, max_tokens: 6, temperature: 0 }, worker ? { headers: { "x-radixgate-worker": worker } } : {})
          .withResponse();
        return { data, worker: response.headers.get("x-radixgate-worker")!, placement: response.headers.get("x-radixgate-placement")! };
      };
      expect(await storedStatesSeen(server)).toBe(0);
      const messages: Message[] = [
        { role: "system", content: salted(300) },
        { role: "user", content: "step 1: list the files" },
      ];
      const first = await chat(messages);
      messages.push({ role: "assistant", content: first.data.choices[0]!.message.content! });
      // Another request takes the agent's only slot on that worker: the worker saves the
      // history to its store first, and reports it with this request's start.
      await chat([{ role: "user", content: salted(200) }], first.worker);
      expect(await storedStatesSeen(server)).toBeGreaterThanOrEqual(1);

      // No slot holds the history now. The other worker has run nothing: without the store in
      // the count, the next turn would explore and go there, to compute it all again.
      messages.push({ role: "user", content: "step 2: read the largest file" });
      const second = await chat(messages);
      expect(second.worker).toBe(first.worker);
      expect(second.placement).toMatch(/^exploit;matched=\d+$/);
      expect(Number(second.placement.split("matched=")[1])).toBeGreaterThanOrEqual(first.data.usage!.prompt_tokens - 3);
      // The worker loaded the state: the history was not computed again.
      expect(second.data.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(first.data.usage!.prompt_tokens - 3);
    });
  });
}
