// The OpenAI chat API end to end: the official `openai` client against a real server with
// two llama.cpp workers on the tiny model.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENGINES, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { freshLabel, salted } from "../helpers/salt.js";

let server: TestServer;

// Requests that are not about sampling run greedy (temperature 0): the random-weight model's
// sampled bytes may not be UTF-8, which llama-server refuses (docs/engine.md).

describe.each(ENGINES)("the %s engine", (engine) => {
  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 2, engine });
  });

  afterAll(async () => {
    await server?.close();
  });

  describe("POST /v1/chat/completions", () => {
    it("answers a non-streaming completion with usage and the serving worker", async () => {
      const { data, response } = await server.client.chat.completions
        .create({ model: TINY_MODEL, messages: [{ role: "user", content: "Say hello." }], max_tokens: 8, temperature: 0 })
        .withResponse();
      expect(data.object).toBe("chat.completion");
      expect(data.id).toMatch(/^chatcmpl-/);
      expect(data.model).toBe(TINY_MODEL);
      expect(data.choices[0]?.message.role).toBe("assistant");
      expect(data.choices[0]?.message.content?.length).toBeGreaterThan(0);
      // The tiny model has random weights and never chooses to stop: 8 tokens means "length".
      expect(data.choices[0]?.finish_reason).toBe("length");
      expect(data.usage?.completion_tokens).toBe(8);
      expect(data.usage?.prompt_tokens).toBeGreaterThan(5);
      expect(data.usage?.total_tokens).toBe((data.usage?.prompt_tokens ?? 0) + 8);
      expect(data.usage?.prompt_tokens_details?.cached_tokens).toBeTypeOf("number");
      expect(response.headers.get("x-radixgate-worker")).toMatch(/^w[01]$/);
    });

    it("streams chunks that join to the same text as the non-streaming answer at temperature 0", async () => {
      const request = { model: TINY_MODEL, messages: [{ role: "user" as const, content: `Count the files. ${freshLabel()}` }], max_tokens: 16, temperature: 0 };
      const whole = await server.client.chat.completions.create(request);
      const stream = await server.client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
      const pieces: string[] = [];
      let finishReason: string | null = null;
      let usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        if (choice.delta.content) pieces.push(choice.delta.content);
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      expect(pieces.length).toBeGreaterThan(1);
      expect(pieces.join("")).toBe(whole.choices[0]?.message.content);
      expect(finishReason).toBe("length");
      expect(usage?.completion_tokens).toBe(16);
      expect(usage?.prompt_tokens).toBe(whole.usage?.prompt_tokens);
      expect(usage?.prompt_tokens_details?.cached_tokens).toBeTypeOf("number");
    });

    it("omits the usage chunk unless stream_options.include_usage is set", async () => {
      const stream = await server.client.chat.completions.create({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 3,
        // Greedy: llama-server refused a sampled answer of the random-weight model once
        // ("does not match the expected Content-only format"), which is not what this tests.
        temperature: 0,
        stream: true,
      });
      let sawUsage = false;
      for await (const chunk of stream) if (chunk.usage) sawUsage = true;
      expect(sawUsage).toBe(false);
    });

    it("reuses the KV cache: a second turn on the same worker reports the first turn's prompt as cached", async () => {
      const system = salted(300);
      const firstTurn = [
        { role: "system" as const, content: system },
        { role: "user" as const, content: "List the files." },
      ];
      const first = await server.client.chat.completions.create({ model: TINY_MODEL, messages: firstTurn, max_tokens: 12, temperature: 0 }).withResponse();
      const worker = first.response.headers.get("x-radixgate-worker")!;
      const firstPrompt = first.data.usage!.prompt_tokens;
      expect(firstPrompt).toBeGreaterThan(300);
      // Only the template's opening tokens (BOS, <|im_start|>system...) can be shared with
      // whatever the slot held before: the salted prompt itself is new.
      expect(first.data.usage?.prompt_tokens_details?.cached_tokens).toBeLessThan(10);

      const secondTurn = [
        ...firstTurn,
        { role: "assistant" as const, content: first.data.choices[0]!.message.content! },
        { role: "user" as const, content: "And their sizes?" },
      ];
      const second = await server.client.chat.completions
        .create({ model: TINY_MODEL, messages: secondTurn, max_tokens: 4, temperature: 0 }, { headers: { "x-radixgate-worker": worker } })
        .withResponse();
      expect(second.response.headers.get("x-radixgate-worker")).toBe(worker);
      const cached = second.data.usage!.prompt_tokens_details!.cached_tokens!;
      expect(cached).toBeGreaterThanOrEqual(firstPrompt - 3);
      expect(cached).toBeLessThan(second.data.usage!.prompt_tokens);
      expect(second.response.headers.get("x-radixgate-cached-tokens")).toBe(String(cached));

      // The other worker never saw this conversation: nothing of it is cached there.
      const other = worker === "w0" ? "w1" : "w0";
      const elsewhere = await server.client.chat.completions.create(
        { model: TINY_MODEL, messages: secondTurn, max_tokens: 2, temperature: 0 },
        { headers: { "x-radixgate-worker": other } },
      );
      expect(elsewhere.usage?.prompt_tokens_details?.cached_tokens).toBeLessThan(10);
    });

    it("spreads single requests over both workers with the roundrobin counter", async () => {
      const served: string[] = [];
      for (let i = 0; i < 4; i++) {
        const { response } = await server.client.chat.completions
          .create({ model: TINY_MODEL, messages: [{ role: "user", content: `question ${i}` }], max_tokens: 1, temperature: 0 })
          .withResponse();
        served.push(response.headers.get("x-radixgate-worker")!);
      }
      expect(new Set(served)).toEqual(new Set(["w0", "w1"]));
      expect(served[0]).not.toBe(served[1]);
      expect(served[1]).not.toBe(served[2]);
    });

    it("runs more requests at once than a worker has slots, and all complete", async () => {
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: `parallel ${i}` }], max_tokens: 6, temperature: 0 }),
        ),
      );
      for (const result of results) expect(result.usage?.completion_tokens).toBe(6);
    });

    it("cancels the generation when a streaming client disconnects, and keeps serving", async () => {
      const health = async () =>
        (await (await fetch(server.baseURL.replace(/\/v1$/, "/health"))).json()) as { workers: { in_flight: number; finished: { cancelled: number } }[] };
      const cancelledBefore = (await health()).workers.reduce((sum, worker) => sum + worker.finished.cancelled, 0);
      const abort = new AbortController();
      const stream = await server.client.chat.completions.create(
        // Greedy: this prompt's answer runs to max_tokens on both engines (no end-of-text), so
        // the stream can only end early by the cancel (sampled, it sometimes ended by itself).
        { model: TINY_MODEL, messages: [{ role: "user", content: "a very long answer" }], max_tokens: 1900, temperature: 0, stream: true },
        { signal: abort.signal },
      );
      let chunks = 0;
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content && ++chunks === 2) {
            abort.abort();
            break;
          }
        }
      } catch {
        // the client's own abort may surface as an error: that is the point
      }
      expect(chunks).toBe(2);
      // The worker's in-flight count drains back to zero: the slot was freed, nothing leaked.
      let inFlight = -1;
      for (let poll = 0; poll < 200 && inFlight !== 0; poll++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        inFlight = (await health()).workers.reduce((sum, worker) => sum + worker.in_flight, 0);
      }
      expect(inFlight).toBe(0);
      // ...because the worker stopped it (finish reason "cancelled"), not because it ran to max_tokens.
      const cancelledAfter = (await health()).workers.reduce((sum, worker) => sum + worker.finished.cancelled, 0);
      expect(cancelledAfter).toBe(cancelledBefore + 1);
      const next = await server.client.chat.completions.create({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "next" }],
        max_tokens: 2,
        temperature: 0,
      });
      expect(next.usage?.completion_tokens).toBe(2);
    });
  });

  describe("n choices", () => {
    it("answers n seeded choices from one prompt evaluation: prompt counted once, later choices find it cached", async () => {
      const request = {
        model: TINY_MODEL,
        messages: [
          { role: "system" as const, content: salted(120) },
          { role: "user" as const, content: "three takes please" },
        ],
        max_tokens: 6,
        temperature: 1,
        seed: 7,
        n: 3,
      };
      const { data, response } = await server.client.chat.completions.create(request).withResponse();
      expect(data.choices.map((choice) => choice.index)).toEqual([0, 1, 2]);
      for (const choice of data.choices) {
        expect(choice.message.role).toBe("assistant");
        expect(choice.message.content?.length).toBeGreaterThan(0);
        expect(choice.finish_reason).toBe("length");
      }
      // Seed + index per choice: they differ, and the same request gives them again.
      expect(new Set(data.choices.map((choice) => choice.message.content)).size).toBeGreaterThan(1);
      expect(data.usage?.completion_tokens).toBe(18);
      const prompt = data.usage!.prompt_tokens;
      expect(data.usage?.total_tokens).toBe(prompt + 18);
      const cached = response.headers.get("x-radixgate-choice-cached-tokens")!.split(",").map(Number);
      expect(cached).toHaveLength(3);
      expect(cached[0]).toBeLessThan(prompt / 2);
      expect(cached[1]).toBeGreaterThanOrEqual(prompt - 1);
      expect(cached[2]).toBeGreaterThanOrEqual(prompt - 1);
      const again = await server.client.chat.completions.create(request);
      expect(again.choices.map((choice) => choice.message.content)).toEqual(data.choices.map((choice) => choice.message.content));
    });

    it("streams the choices one after another, each with its index, role and finish, the usage once at the end", async () => {
      const request = {
        model: TINY_MODEL,
        messages: [{ role: "user" as const, content: `two streamed takes ${freshLabel()}` }],
        max_tokens: 5,
        temperature: 1,
        seed: 3,
        n: 2,
      };
      const whole = await server.client.chat.completions.create(request);
      const stream = await server.client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
      const texts = ["", ""];
      const order: string[] = [];
      let usage: { completion_tokens: number } | undefined;
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        if (choice.delta.role) order.push(`role${choice.index}`);
        if (choice.delta.content) texts[choice.index] += choice.delta.content;
        if (choice.finish_reason) order.push(`finish${choice.index}`);
      }
      expect(order).toEqual(["role0", "finish0", "role1", "finish1"]);
      expect(texts).toEqual(whole.choices.map((choice) => choice.message.content));
      expect(usage?.completion_tokens).toBe(10);
    });

    it("gives the legacy completions API n choices too", async () => {
      const data = await server.client.completions.create({
        model: TINY_MODEL,
        prompt: `legacy takes ${freshLabel()}`,
        max_tokens: 4,
        temperature: 1,
        seed: 11,
        n: 2,
      });
      expect(data.choices.map((choice) => choice.index)).toEqual([0, 1]);
      expect(data.choices.every((choice) => choice.text.length > 0)).toBe(true);
      expect(data.usage?.completion_tokens).toBe(8);
    });
  });

  describe("GET /v1/models and /health", () => {
    it("lists the served model", async () => {
      const models = await server.client.models.list();
      expect(models.data.map((model) => model.id)).toEqual([TINY_MODEL]);
    });

    it("reports both workers alive", async () => {
      const response = await fetch(server.baseURL.replace(/\/v1$/, "/health"));
      expect(response.status).toBe(200);
      const body = (await response.json()) as { status: string; workers: { id: string; alive: boolean }[] };
      expect(body.status).toBe("ok");
      expect(body.workers.map((worker) => [worker.id, worker.alive])).toEqual([
        ["w0", true],
        ["w1", true],
      ]);
    });
  });
});
