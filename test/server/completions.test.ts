// OpenAI's legacy completions end to end: the official `openai` client and raw HTTP against a
// real server with two llama.cpp workers on the tiny model.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModel } from "../../src/presets/make-model.js";
import { buildVocab } from "../../src/presets/vocab.js";
import { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import { ENGINES, postRaw, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { freshLabel, salted } from "../helpers/salt.js";

const vocab = buildVocab();
let server: TestServer;
/** The server's own tokenizer path, to build token-array prompts. */
let preparer: PromptPreparer;

beforeAll(async () => {
  preparer = new PromptPreparer([{ id: TINY_MODEL, path: await ensureModel("tiny") }], 1);
});

afterAll(async () => {
  await preparer?.close();
});

describe.each(ENGINES)("the %s engine", (engine) => {
  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 2, engine });
  });

  afterAll(async () => {
    await server?.close();
  });

  describe("POST /v1/completions", () => {
    it("answers a text prompt with OpenAI's text_completion shape, usage and the serving worker", async () => {
      const { data, response } = await server.client.completions
        .create({ model: TINY_MODEL, prompt: "Once upon a time", max_tokens: 8, temperature: 0 })
        .withResponse();
      expect(data.object).toBe("text_completion");
      expect(data.id).toMatch(/^cmpl-/);
      expect(data.model).toBe(TINY_MODEL);
      expect(typeof data.created).toBe("number");
      expect(data.choices).toHaveLength(1);
      expect(data.choices[0]).toMatchObject({ index: 0, logprobs: null, finish_reason: "length" });
      expect(data.choices[0]!.text.length).toBeGreaterThan(0);
      expect(data.usage?.completion_tokens).toBe(8);
      expect(data.usage?.prompt_tokens).toBeGreaterThan(1);
      expect(data.usage?.total_tokens).toBe(data.usage!.prompt_tokens + 8);
      expect((data.usage as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details?.cached_tokens).toBeTypeOf("number");
      expect(response.headers.get("x-radixgate-worker")).toMatch(/^w[01]$/);
      expect(response.headers.get("x-radixgate-cached-tokens")).toMatch(/^\d+$/);
      expect(response.headers.get("x-radixgate-placement")).toMatch(/;matched=\d+$/);
    });

    it("streams text_completion chunks that join to the non-streaming text at temperature 0, usage last, then [DONE]", async () => {
      const request = { model: TINY_MODEL, prompt: `Count the files. ${freshLabel()}`, max_tokens: 16, temperature: 0 };
      const whole = await server.client.completions.create(request);
      const stream = await server.client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
      const pieces: string[] = [];
      let finishReason: string | null = null;
      let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
      for await (const chunk of stream) {
        expect(chunk.object).toBe("text_completion");
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices[0];
        if (!choice) continue;
        if (choice.text) pieces.push(choice.text);
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      expect(pieces.length).toBeGreaterThan(1);
      expect(pieces.join("")).toBe(whole.choices[0]?.text);
      expect(finishReason).toBe("length");
      expect(usage?.completion_tokens).toBe(16);
      expect(usage?.prompt_tokens).toBe(whole.usage?.prompt_tokens);

      // On the wire: SSE events, the usage chunk (no choices) just before `data: [DONE]`.
      const raw = await fetch(`${server.baseURL}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
      });
      expect(raw.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(raw.headers.get("x-radixgate-worker")).toMatch(/^w[01]$/);
      const events = (await raw.text()).split("\n\n").filter(Boolean);
      expect(events.at(-1)).toBe("data: [DONE]");
      const usageEvent = JSON.parse(events.at(-2)!.slice("data: ".length)) as { choices: unknown[]; usage: { completion_tokens: number } };
      expect(usageEvent.choices).toEqual([]);
      expect(usageEvent.usage.completion_tokens).toBe(16);
    });

    it("gives a token-array prompt the same completion as the equivalent text, with or without BOS", async () => {
      const text = `the tool returns a list of files ${freshLabel()}`;
      const tokens = [...(await preparer.text({ modelId: TINY_MODEL, text })).tokens];
      expect(tokens[0]).toBe(vocab.bosId);
      const asText = await server.client.completions.create({ model: TINY_MODEL, prompt: text, max_tokens: 12, temperature: 0 });
      const withBos = await server.client.completions.create({ model: TINY_MODEL, prompt: tokens, max_tokens: 12, temperature: 0 });
      const withoutBos = await server.client.completions.create({ model: TINY_MODEL, prompt: tokens.slice(1), max_tokens: 12, temperature: 0 });
      const nested = await server.client.completions.create({ model: TINY_MODEL, prompt: [tokens.slice(1)], max_tokens: 12, temperature: 0 });
      for (const answer of [withBos, withoutBos, nested]) {
        expect(answer.choices[0]?.text).toBe(asText.choices[0]?.text);
        // The BOS the worker evaluates is counted whether the client sent it or not.
        expect(answer.usage?.prompt_tokens).toBe(tokens.length);
      }
      expect(asText.usage?.prompt_tokens).toBe(tokens.length);
      // A list holding one string is that string.
      const listed = await server.client.completions.create({ model: TINY_MODEL, prompt: [text], max_tokens: 12, temperature: 0 });
      expect(listed.choices[0]?.text).toBe(asText.choices[0]?.text);
    });

    it("parses special-token text in a raw prompt as the control token (the client owns the whole prompt)", async () => {
      const { tokens } = await preparer.text({ modelId: TINY_MODEL, text: "<|im_start|>user\nhi<|im_end|>" });
      expect(tokens.filter((token) => token === vocab.imStartId)).toHaveLength(1);
      expect(tokens.filter((token) => token === vocab.imEndId)).toHaveLength(1);
      const answer = await server.client.completions.create({ model: TINY_MODEL, prompt: "<|im_start|>user\nhi<|im_end|>", max_tokens: 2, temperature: 0 });
      expect(answer.usage?.prompt_tokens).toBe(tokens.length);
    });

    it("reports a repeated long prompt as cached on the worker that served it", async () => {
      const prompt = salted(300);
      const first = await server.client.completions.create({ model: TINY_MODEL, prompt, max_tokens: 4, temperature: 0 }).withResponse();
      const worker = first.response.headers.get("x-radixgate-worker")!;
      const promptTokens = first.data.usage!.prompt_tokens;
      expect(promptTokens).toBeGreaterThan(300);
      const again = await server.client.completions
        .create({ model: TINY_MODEL, prompt, max_tokens: 4, temperature: 0 }, { headers: { "x-radixgate-worker": worker } })
        .withResponse();
      const cached = (again.data.usage as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details?.cached_tokens;
      // All but the last prompt token, which is evaluated again for its logits.
      expect(cached).toBe(promptTokens - 1);
      expect(again.response.headers.get("x-radixgate-cached-tokens")).toBe(String(cached));
      expect(again.data.choices[0]?.text).toBe(first.data.choices[0]?.text);
    });

    it("keeps a prompt that fills most of the slot whole (llama.cpp would drop its start to leave room for a context shift)", async () => {
      // Past 90 % of the slot: node-llama-cpp's default shift size used to cut the prompt's start.
      const prompt = salted(1000);
      const first = await server.client.completions.create({ model: TINY_MODEL, prompt, max_tokens: 4, temperature: 0 }).withResponse();
      const promptTokens = first.data.usage!.prompt_tokens;
      expect(promptTokens).toBeGreaterThan(0.9 * 2048);
      expect(promptTokens).toBeLessThan(2048 - 4);
      const worker = first.response.headers.get("x-radixgate-worker")!;
      const again = await server.client.completions.create(
        { model: TINY_MODEL, prompt, max_tokens: 4, temperature: 0 },
        { headers: { "x-radixgate-worker": worker } },
      );
      expect((again.usage as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details?.cached_tokens).toBe(promptTokens - 1);
    });
  });
});

// Refused before any worker sees the request: one engine is enough.
describe("refusals", () => {
  beforeAll(async () => {
    server = await startTestServer({ workers: 1, slots: 2 });
  });

  afterAll(async () => {
    await server?.close();
  });

  describe("POST /v1/completions refuses what it cannot do, naming the field", () => {
    const cases: { name: string; body: Record<string, unknown>; status: number; code: string; param: string; says: RegExp }[] = [
      {
        name: "several prompts",
        body: { prompt: ["one", "two"] },
        status: 400,
        code: "unsupported_parameter",
        param: "prompt",
        says: /2 prompts, but only one prompt per request is supported/,
      },
      {
        name: "several token prompts",
        body: { prompt: [[1, 2], [3, 4], [5]] },
        status: 400,
        code: "unsupported_parameter",
        param: "prompt",
        says: /3 prompts/,
      },
      {
        name: "a token id past the vocabulary",
        body: { prompt: [1, 300, vocab.tokens.length] },
        status: 400,
        code: "invalid_request",
        param: "prompt[2]",
        says: new RegExp(`is ${vocab.tokens.length}, which is not a token id .* from 0 to ${vocab.tokens.length - 1}`),
      },
      {
        name: "a negative token id",
        body: { prompt: [[5, -1]] },
        status: 400,
        code: "invalid_request",
        param: "prompt[0][1]",
        says: /is -1, which is not a token id/,
      },
      {
        name: "a fractional token id",
        body: { prompt: [5, 2.5] },
        status: 400,
        code: "invalid_request",
        param: "prompt[1]",
        says: /must be an integer token id; got 2.5/,
      },
      { name: "a mixed array", body: { prompt: [5, "x"] }, status: 400, code: "invalid_request", param: "prompt[1]", says: /`prompt\[1\]` is "x"/ },
      {
        name: "a prompt of the wrong type",
        body: { prompt: 42 },
        status: 400,
        code: "invalid_request",
        param: "prompt",
        says: /must be string or array; got number 42/,
      },
      { name: "a missing prompt", body: {}, status: 400, code: "invalid_request", param: "prompt", says: /`prompt` is required/ },
      { name: "echo", body: { prompt: "x", echo: true }, status: 400, code: "unsupported_parameter", param: "echo", says: /`echo` is not supported/ },
      { name: "suffix", body: { prompt: "x", suffix: "end" }, status: 400, code: "unsupported_parameter", param: "suffix", says: /`suffix` is not supported/ },
      { name: "best_of", body: { prompt: "x", best_of: 3 }, status: 400, code: "unsupported_parameter", param: "best_of", says: /`best_of` is not supported/ },
      {
        name: "logprobs above OpenAI's 5",
        body: { prompt: "x", logprobs: 6 },
        status: 400,
        code: "invalid_request",
        param: "logprobs",
        says: /must be <= 5/,
      },
      { name: "n above generation.maxChoices", body: { prompt: "x", n: 20 }, status: 400, code: "invalid_request", param: "n", says: /at most 8 choices/ },
      {
        name: "an unknown model",
        body: { model: "gpt-3.5-turbo-instruct", prompt: "x" },
        status: 404,
        code: "model_not_found",
        param: "model",
        says: /Served models: radixgate-tiny/,
      },
      {
        name: "a prompt longer than a slot",
        body: { prompt: "files ".repeat(2500) },
        status: 413,
        code: "context_length_exceeded",
        param: "prompt",
        says: /The prompt is \d+ tokens but a slot .* holds 2048 tokens/,
      },
      {
        name: "a token prompt longer than a slot",
        body: { prompt: Array.from({ length: 2048 }, () => 300) },
        status: 413,
        code: "context_length_exceeded",
        param: "prompt",
        says: /The prompt is 2049 tokens/,
      },
    ];
    for (const testCase of cases) {
      it(`refuses ${testCase.name} with ${testCase.status} ${testCase.code}`, async () => {
        const response = await postRaw(server.baseURL, "/completions", JSON.stringify({ model: TINY_MODEL, max_tokens: 2, ...testCase.body }));
        expect(response.status).toBe(testCase.status);
        expect(response.json.error?.code).toBe(testCase.code);
        expect(response.json.error?.param).toBe(testCase.param);
        expect(response.json.error?.message).toMatch(testCase.says);
      });
    }

    it("accepts the neutral values of the refused parameters", async () => {
      const response = await postRaw(
        server.baseURL,
        "/completions",
        JSON.stringify({ model: TINY_MODEL, prompt: "x", max_tokens: 2, n: 1, best_of: 1, echo: false, suffix: null, logprobs: null, logit_bias: {} }),
      );
      expect(response.status).toBe(200);
      expect((response.json.choices as unknown[]).length).toBe(1);
    });

    it("refuses a streaming request for an unknown model with a plain 404, and a bad token id before the stream opens", async () => {
      const unknown = await postRaw(server.baseURL, "/completions", JSON.stringify({ model: "nope", prompt: "x", stream: true }));
      expect(unknown.status).toBe(404);
      expect(unknown.headers.get("content-type")).toMatch(/application\/json/);
      const badToken = await postRaw(server.baseURL, "/completions", JSON.stringify({ model: TINY_MODEL, prompt: [99999], stream: true }));
      expect(badToken.status).toBe(400);
      expect(badToken.json.error?.param).toBe("prompt[0]");
    });

    it("keeps serving after all of the above", async () => {
      const ok = await server.client.completions.create({ model: TINY_MODEL, prompt: "still there?", max_tokens: 3, temperature: 0 });
      expect(ok.usage?.completion_tokens).toBe(3);
    });
  });
});
