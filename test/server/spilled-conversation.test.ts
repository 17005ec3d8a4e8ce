// An agent's history that left its worker's slot is still on that worker: in its state store.
// The worker reports what it saves and drops, and preble sends the next turn back there to
// load it, instead of exploring and computing the whole history on another worker. Two
// workers of one slot each, in thread workers (the default) and process workers; the
// llama-server engine keeps no state store of ours.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { folderBytes, STATE_FOLDER_SHARE } from "../../src/serving/spill-budget.js";
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

for (const isolation of ["thread", "process"] as const) {
  describe(`a state store budget the state folder cannot hold (${isolation} workers)`, () => {
    let server: TestServer;
    let dir: string;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "radixgate-states-"));
      // More than any folder holds: every worker gets an even share of half of it instead.
      server = await startTestServer({ workers: 2, slots: 1, isolation, spill: { budgetBytes: 2 ** 52, dir } });
    });

    afterAll(async () => {
      await server?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("is lowered to each worker's share of the folder, and the worker still saves and loads states", async () => {
      const share = Math.floor((folderBytes(dir)! * STATE_FOLDER_SHARE) / 2);
      const { fleet } = server.radixgate;
      expect(fleet.spill.lowered).toEqual({ dir, folderBytes: folderBytes(dir), workers: 2 });
      expect(fleet.workers.map((worker) => worker.engine.init.spill.budgetBytes)).toEqual([share, share]);
      // A history pushed out of its worker's only slot is stored there and comes back from the store.
      const ask = (content: string, worker: string) =>
        server.client.chat.completions
          .create({ model: TINY_MODEL, messages: [{ role: "user", content }], max_tokens: 4, temperature: 0 }, { headers: { "x-radixgate-worker": worker } })
          .withResponse();
      const history = salted(300);
      const first = await ask(history, "w0");
      await ask(salted(200), "w0");
      expect(await storedStatesSeen(server)).toBeGreaterThanOrEqual(1);
      const again = await ask(history, "w0");
      expect(again.data.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(first.data.usage!.prompt_tokens - 3);
    });
  });
}
