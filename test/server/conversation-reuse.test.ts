// A conversation's next turn reuses the previous answer's KV cells, not only the previous
// prompt's: the answer's text, sent back by the client, must spell the tokens the slot
// generated, and the scheduler's tree must know the slot holds them. With a SentencePiece tokenizer (the tiny model's, and many others) that means
// keeping the first token's leading space, as llama-server does. In thread and process
// workers and on the llama-server engine, answers streamed and whole.
import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { serversInEveryMode, TINY_MODEL, type TestServer, WORKER_MODES } from "../helpers/server.js";

const servers = serversInEveryMode({ workers: 1, slots: 2 });

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

interface Turn {
  text: string;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** The prompt tokens the scheduler's tree found on a worker when it placed the request. */
  matchedTokens: number;
}

/** The `matched=` of the placement header (`<reason>;matched=<tokens>`). */
function matchedOf(response: Response): number {
  return Number(/matched=(\d+)/.exec(response.headers.get("x-radixgate-placement") ?? "")?.[1] ?? Number.NaN);
}

/** One greedy turn, streamed (the chunks joined, usage from the last) or whole. */
async function turn(server: TestServer, messages: Message[], maxTokens: number, stream: boolean): Promise<Turn> {
  const request = { model: TINY_MODEL, messages, max_tokens: maxTokens, temperature: 0 };
  if (!stream) {
    const { data, response } = await server.client.chat.completions.create(request).withResponse();
    return {
      text: data.choices[0]!.message.content!,
      promptTokens: data.usage!.prompt_tokens,
      cachedTokens: data.usage!.prompt_tokens_details!.cached_tokens!,
      completionTokens: data.usage!.completion_tokens,
      matchedTokens: matchedOf(response),
    };
  }
  const { data: chunks, response } = await server.client.chat.completions
    .create({ ...request, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  let text = "";
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of chunks) {
    text += chunk.choices[0]?.delta.content ?? "";
    usage = chunk.usage ?? usage;
  }
  return {
    text,
    promptTokens: usage!.prompt_tokens,
    cachedTokens: usage!.prompt_tokens_details!.cached_tokens!,
    completionTokens: usage!.completion_tokens,
    matchedTokens: matchedOf(response),
  };
}

/** A long system prompt and a question. The salt is fixed, so the answer is the same every run
 *  (its first token has a leading space); each test server starts with nothing cached. */
function firstTurn(salt: string): Message[] {
  const filler = Array.from({ length: 300 }, (_, i) => ["the", "tool", "returns", "a", "list", "of", "files", "and", "their", "sizes"][i % 10]).join(" ");
  return [
    { role: "system", content: `${salt}: a run of the KV reuse test\n${filler}` },
    { role: "user", content: "List the files." },
  ];
}

describe.each(WORKER_MODES)("a conversation's next turn (%s workers)", (mode) => {
  it.each([false, true])("finds the previous prompt and answer cached (streamed: %s), the answer spelled as llama-server spells it", async (stream) => {
    const server = servers[mode];
    // Its own salt: the comparison below asks llama-server's server the first turns of the other modes.
    const salt = `${mode} ${stream ? "streamed" : "whole"} 1`;
    const first = await turn(server, firstTurn(salt), 12, stream);
    expect(first.cachedTokens).toBeLessThan(10);
    expect(first.completionTokens).toBe(12);
    // The same text as llama-server's for the same greedy request (whole, on its own server).
    if (mode !== "llama-server") expect(first.text).toBe((await turn(servers["llama-server"], firstTurn(salt), 12, false)).text);

    const second = await turn(
      server,
      [...firstTurn(salt), { role: "assistant", content: first.text }, { role: "user", content: "And their sizes?" }],
      4,
      stream,
    );
    // The last generated token is never evaluated, so the slot holds completion_tokens - 1 of
    // the answer. An answer that lost its first token's leading space matched the slot only up
    // to the end of the first prompt: each turn recomputed the previous answer.
    expect(second.cachedTokens).toBeGreaterThanOrEqual(first.promptTokens + first.completionTokens - 1);
    expect(second.cachedTokens).toBeLessThan(second.promptTokens);
    // And the scheduler knew it before placing the turn: the worker reported the answer's tokens
    // with the first turn's end, so the tree matched through the answer, not only the first
    // prompt (a conversation with short questions and long answers otherwise looked mostly
    // new, and preble explored it away from its cache).
    expect(second.matchedTokens).toBeGreaterThanOrEqual(first.promptTokens + first.completionTokens - 1);
  });
});
