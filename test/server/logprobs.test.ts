// logprobs and top_logprobs end to end with the official `openai` client: chat and legacy
// completions, streamed and not, in thread and process workers and on the llama-server engine, from llama.cpp's
// next-token probabilities.
import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { postRaw, serversInEveryMode, TINY_MODEL, WORKER_MODES } from "../helpers/server.js";
import { freshLabel } from "../helpers/salt.js";

const servers = serversInEveryMode({ workers: 1, slots: 2 });

type Entry = OpenAI.Chat.Completions.ChatCompletionTokenLogprob;

function utf8(text: string): number[] {
  return [...Buffer.from(text, "utf8")];
}

/**
 * What holds for every entry: a log probability, its bytes, its candidates most likely first:
 * `top` of them, or fewer when the sampler kept fewer (top-k, top-p), and then the sampled
 * token is among them.
 */
function expectWellFormed(entries: readonly Entry[], top: number) {
  for (const entry of entries) {
    expect(entry.logprob).toBeLessThanOrEqual(0);
    expect(entry.bytes).toEqual(utf8(entry.token));
    expect(entry.top_logprobs.length).toBeLessThanOrEqual(top);
    if (top > 0) expect(entry.top_logprobs.length).toBeGreaterThan(0);
    if (entry.top_logprobs.length < top) expect(entry.top_logprobs.map((candidate) => candidate.token)).toContain(entry.token);
    const logprobs = entry.top_logprobs.map((candidate) => candidate.logprob);
    expect(logprobs).toEqual([...logprobs].sort((a, b) => b - a));
    for (const candidate of entry.top_logprobs) expect(candidate.bytes).toEqual(utf8(candidate.token));
    expect(logprobs.reduce((sum, logprob) => sum + Math.exp(logprob), 0)).toBeLessThanOrEqual(1 + 1e-6);
  }
}

describe.each(WORKER_MODES)("chat logprobs (%s workers)", (isolation) => {
  const request = () => ({
    model: TINY_MODEL,
    messages: [{ role: "user" as const, content: `tell me ${freshLabel()}` }],
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    top_logprobs: 3,
  });

  it("gives one entry per generated token: they join to the text, greedy picks the first candidate", async () => {
    const data = await servers[isolation].client.chat.completions.create(request());
    const choice = data.choices[0]!;
    const entries = choice.logprobs!.content!;
    expect(entries).toHaveLength(data.usage!.completion_tokens);
    expect(entries.map((entry) => entry.token).join("")).toBe(choice.message.content);
    expectWellFormed(entries, 3);
    for (const entry of entries) {
      expect(entry.top_logprobs[0]!.token).toBe(entry.token);
      expect(entry.top_logprobs[0]!.logprob).toBe(entry.logprob);
    }
  });

  it("streams each piece of text with the entries of its tokens: the same as the whole answer's", async () => {
    const body = request();
    const whole = await servers[isolation].client.chat.completions.create(body);
    const stream = await servers[isolation].client.chat.completions.create({ ...body, stream: true });
    const entries: Entry[] = [];
    let text = "";
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.delta.content) {
        text += choice.delta.content;
        expect(choice.logprobs?.content?.map((entry) => entry.token).join("")).toBe(choice.delta.content);
      }
      entries.push(...(choice.logprobs?.content ?? []));
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    const expected = whole.choices[0]!.logprobs!.content!;
    expect(entries.map((entry) => entry.token)).toEqual(expected.map((entry) => entry.token));
    entries.forEach((entry, i) => {
      expect(entry.logprob).toBeCloseTo(expected[i]!.logprob, 3);
    });
  });
});

describe("chat logprobs options", () => {
  it("has no candidates without top_logprobs, none at all without logprobs, and samples from its candidates at temperature 1", async () => {
    const client = servers.thread.client;
    const messages = [{ role: "user" as const, content: `sample ${freshLabel()}` }];
    const bare = await client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 4, logprobs: true, temperature: 1, seed: 3 });
    const entries = bare.choices[0]!.logprobs!.content!;
    expect(entries).toHaveLength(4);
    expectWellFormed(entries, 0);
    const off = await client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 4 });
    expect(off.choices[0]!.logprobs).toBeNull();
    const wide = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 8,
      logprobs: true,
      top_logprobs: 20,
      temperature: 1,
      seed: 3,
    });
    const wideEntries = wide.choices[0]!.logprobs!.content!;
    expectWellFormed(wideEntries, 20);
    expect(Math.max(...wideEntries.map((entry) => entry.top_logprobs.length))).toBeGreaterThan(3);
  });

  for (const [body, param, says] of [
    [{ top_logprobs: 2 }, "top_logprobs", /needs `logprobs: true`/],
    [{ logprobs: true, top_logprobs: 21 }, "top_logprobs", /<= 20/],
  ] as const) {
    it(`refuses ${JSON.stringify(body)} with a 400 naming ${param}`, async () => {
      const response = await postRaw(
        servers.thread.baseURL,
        "/chat/completions",
        JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 1, ...body }),
      );
      expect(response.status).toBe(400);
      expect(response.json.error?.param).toBe(param);
      expect(response.json.error?.message).toMatch(says);
    });
  }
});

describe("legacy completions logprobs", () => {
  const request = () => ({ model: TINY_MODEL, prompt: `once upon ${freshLabel()}`, max_tokens: 6, temperature: 1, seed: 9, logprobs: 2 });

  /** The legacy lists: parallel, offsets counting the completion's characters from 0. */
  function expectLegacy(logprobs: OpenAI.Completions.CompletionChoice.Logprobs, text: string, count: number) {
    expect(logprobs.tokens).toHaveLength(count);
    expect(logprobs.tokens!.join("")).toBe(text);
    expect(logprobs.token_logprobs).toHaveLength(count);
    for (const logprob of logprobs.token_logprobs!) expect(logprob).toBeLessThanOrEqual(0);
    expect(logprobs.top_logprobs).toHaveLength(count);
    for (const top of logprobs.top_logprobs!) {
      expect(Object.keys(top).length).toBeGreaterThan(0);
      expect(Object.keys(top).length).toBeLessThanOrEqual(2);
    }
    let offset = 0;
    logprobs.tokens!.forEach((token, i) => {
      expect(logprobs.text_offset![i]).toBe(offset);
      offset += token.length;
    });
  }

  it("gives tokens, their logprobs, the top candidates and text offsets, whole and streamed", async () => {
    const client = servers.thread.client;
    const body = request();
    const whole = await client.completions.create(body);
    expectLegacy(whole.choices[0]!.logprobs!, whole.choices[0]!.text, 6);
    const stream = await client.completions.create({ ...body, stream: true });
    const merged = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as Record<string, number>[], text_offset: [] as number[] };
    let text = "";
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice?.logprobs) continue;
      text += choice.text;
      merged.tokens.push(...choice.logprobs.tokens!);
      merged.token_logprobs.push(...choice.logprobs.token_logprobs!);
      merged.top_logprobs.push(...choice.logprobs.top_logprobs!);
      merged.text_offset.push(...choice.logprobs.text_offset!);
    }
    expect(text).toBe(whole.choices[0]!.text);
    expectLegacy(merged, text, 6);
    expect(merged.tokens).toEqual(whole.choices[0]!.logprobs!.tokens);
  });

  it("refuses logprobs above 5 with a 400 naming it", async () => {
    const response = await postRaw(servers.thread.baseURL, "/completions", JSON.stringify({ ...request(), logprobs: 6 }));
    expect(response.status).toBe(400);
    expect(response.json.error?.param).toBe("logprobs");
  });
});
