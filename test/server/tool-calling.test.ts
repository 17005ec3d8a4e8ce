// Tool calling end to end with the official `openai` client against a real server on the
// tiny model: its weights are random, so calls come from the grammar a `required` or named
// tool_choice builds, and every call it writes must parse.
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postRaw, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { freshLabel } from "../helpers/salt.js";

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type Tool = OpenAI.Chat.Completions.ChatCompletionTool;

let server: TestServer;
/** The same server with process workers, and one on the llama-server engine, for the tool loop in every mode. */
let processServer: TestServer;
let llamaServer: TestServer;

beforeAll(async () => {
  server = await startTestServer({ workers: 2, slots: 2 });
  processServer = await startTestServer({ workers: 1, slots: 2, isolation: "process" });
  llamaServer = await startTestServer({ workers: 1, slots: 2, engine: "llama-server" });
});

afterAll(async () => {
  await server?.close();
  await processServer?.close();
  await llamaServer?.close();
});

const WEATHER: Tool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city now.",
    parameters: {
      type: "object",
      properties: { city: { type: "string", enum: ["Paris", "Oslo", "Lima"] }, unit: { type: "string", enum: ["C", "F"] } },
      required: ["city", "unit"],
    },
  },
};

const TIME: Tool = {
  type: "function",
  function: { name: "get_time", description: "The time in a time zone.", parameters: { type: "object", properties: { zone: { type: "integer" } } } },
};

function conversation(): Message[] {
  return [
    { role: "system", content: `You help with travel. run ${freshLabel()}` },
    { role: "user", content: "What is the weather in Paris?" },
  ];
}

type Completion = OpenAI.Chat.Completions.ChatCompletion;

/** A streamed answer put back together: its content, its calls (by index), its finish reason. */
async function streamed(client: OpenAI, request: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming) {
  const stream = await client.chat.completions.create(request);
  let content = "";
  const calls: { id: string; name: string; arguments: string }[] = [];
  let finishReason: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta.content ?? "";
    for (const delta of choice.delta.tool_calls ?? []) {
      if (delta.id !== undefined) {
        // A call's first chunk: id, type and name, arguments empty; later chunks carry arguments only.
        expect(delta.type).toBe("function");
        expect(delta.function?.arguments).toBe("");
        expect(delta.index).toBe(calls.length);
        calls.push({ id: delta.id, name: delta.function!.name!, arguments: "" });
      } else {
        expect(delta.function?.name).toBeUndefined();
        calls[delta.index]!.arguments += delta.function?.arguments ?? "";
      }
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  return { content, calls, finishReason, usage };
}

function expectWeatherCall(name: string, args: string) {
  expect(name).toBe("get_weather");
  const parsed = JSON.parse(args);
  expect(["Paris", "Oslo", "Lima"]).toContain(parsed.city);
  expect(["C", "F"]).toContain(parsed.unit);
}

describe.each(["thread", "process", "llama-server"] as const)("a tool loop: user, tool call, tool result, answer (%s workers)", (mode) => {
  for (const stream of [false, true]) {
    it(`${stream ? "streams" : "answers"} a required call, then answers from its result on a prompt that reuses the cached turn`, async () => {
      const { client } = mode === "thread" ? server : mode === "process" ? processServer : llamaServer;
      const messages = conversation();
      const session = freshLabel("loop");
      const first = {
        model: TINY_MODEL,
        messages,
        tools: [WEATHER],
        tool_choice: "required" as const,
        parallel_tool_calls: false,
        max_tokens: 120,
        seed: 5,
        user: session,
      };
      const whole: Completion = await client.chat.completions.create(first);
      const choice = whole.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBeNull();
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
      expect(call.id).toMatch(/^call_/);
      expect(call.type).toBe("function");
      expectWeatherCall(call.function.name, call.function.arguments);
      if (stream) {
        // The same seeded request streamed: the same call, in OpenAI's delta chunks.
        const again = await streamed(client, { ...first, stream: true, stream_options: { include_usage: true } });
        expect(again.finishReason).toBe("tool_calls");
        expect(again.content).toBe("");
        expect(again.calls.map(({ name, arguments: args }) => ({ name, args }))).toEqual([{ name: call.function.name, args: call.function.arguments }]);
      }
      const followUp: Message[] = [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21, unit: "C" }) },
      ];
      const second = { model: TINY_MODEL, messages: followUp, tools: [WEATHER], max_tokens: 8, seed: 5, user: session };
      const answer = stream
        ? await streamed(client, { ...second, stream: true, stream_options: { include_usage: true } })
        : await client.chat.completions.create(second).then((data) => ({
            content: data.choices[0]!.message.content ?? "",
            calls: data.choices[0]!.message.tool_calls ?? [],
            finishReason: data.choices[0]!.finish_reason,
            usage: data.usage,
          }));
      expect(answer.calls).toEqual([]);
      expect(answer.finishReason).toBe("length");
      expect(answer.content.length).toBeGreaterThan(0);
      // The turn after the tool result finds the first turn's prompt in the slot's KV cache.
      expect(answer.usage!.prompt_tokens).toBeGreaterThan(whole.usage!.prompt_tokens);
      expect(answer.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(whole.usage!.prompt_tokens - 1);
    });
  }
});

describe("tool_choice", () => {
  it("calls the named function only", async () => {
    for (const seed of [1, 2, 3]) {
      const data = await server.client.chat.completions.create({
        model: TINY_MODEL,
        messages: conversation(),
        tools: [WEATHER, TIME],
        tool_choice: { type: "function", function: { name: "get_time" } },
        parallel_tool_calls: false,
        max_tokens: 120,
        seed,
      });
      const calls = data.choices[0]!.message.tool_calls as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[];
      expect(data.choices[0]!.finish_reason).toBe("tool_calls");
      expect(calls.map((call) => call.function.name)).toEqual(["get_time"]);
      const args = JSON.parse(calls[0]!.function.arguments);
      if (args.zone !== undefined) expect(Number.isInteger(args.zone)).toBe(true);
    }
  });

  it("makes several calls in one answer when parallel_tool_calls allows it, and exactly one when it does not", async () => {
    const callsOf = async (seed: number, parallel: boolean) => {
      const data = await server.client.chat.completions.create({
        model: TINY_MODEL,
        messages: conversation(),
        tools: [WEATHER, TIME],
        tool_choice: "required",
        parallel_tool_calls: parallel,
        max_tokens: 300,
        seed,
      });
      const choice = data.choices[0]!;
      const calls = (choice.message.tool_calls ?? []) as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[];
      expect(calls.length).toBeGreaterThan(0);
      expect(new Set(calls.map((call) => call.id)).size).toBe(calls.length);
      // Every finished call is one of the tools with JSON arguments (one cut by max_tokens may be partial).
      for (const call of choice.finish_reason === "tool_calls" ? calls : calls.slice(0, -1)) {
        expect(["get_weather", "get_time"]).toContain(call.function.name);
        JSON.parse(call.function.arguments);
      }
      return { calls: calls.length, finished: choice.finish_reason === "tool_calls" };
    };
    // The random-weight model decides after each call whether to write another: some seed does.
    let most = 0;
    for (let seed = 1; seed <= 24 && most < 2; seed++) {
      const { calls, finished } = await callsOf(seed, true);
      if (finished) most = Math.max(most, calls);
    }
    expect(most).toBeGreaterThanOrEqual(2);
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const single = await callsOf(seed, false);
      expect(single).toEqual({ calls: 1, finished: true });
    }
  });

  it('"none" calls nothing but still documents the tools, so the prompt is the one "auto" sends', async () => {
    const messages = conversation();
    const none = await server.client.chat.completions.create({ model: TINY_MODEL, messages, tools: [WEATHER], tool_choice: "none", max_tokens: 6, seed: 1 });
    const auto = await server.client.chat.completions.create({ model: TINY_MODEL, messages, tools: [WEATHER], tool_choice: "auto", max_tokens: 6, seed: 1 });
    const bare = await server.client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 6, seed: 1 });
    expect(none.choices[0]!.finish_reason).toBe("length");
    expect(none.choices[0]!.message.tool_calls).toBeUndefined();
    expect(typeof none.choices[0]!.message.content).toBe("string");
    expect(none.usage!.prompt_tokens).toBe(auto.usage!.prompt_tokens);
    expect(none.usage!.prompt_tokens).toBeGreaterThan(bare.usage!.prompt_tokens + 50);
  });
});

describe("tools on the llama-server engine", () => {
  it('"auto" and "none" document the tools in the same prompt and answer (calls are read from the text)', async () => {
    const messages = conversation();
    const none = await llamaServer.client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [WEATHER],
      tool_choice: "none",
      max_tokens: 6,
      seed: 1,
    });
    const auto = await llamaServer.client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [WEATHER],
      tool_choice: "auto",
      max_tokens: 6,
      seed: 1,
    });
    const bare = await llamaServer.client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 6, seed: 1 });
    expect(auto.choices[0]!.finish_reason).toBe("length");
    expect(none.usage!.prompt_tokens).toBe(auto.usage!.prompt_tokens);
    expect(auto.usage!.prompt_tokens).toBeGreaterThan(bare.usage!.prompt_tokens + 50);
    // The second request found the first one's prompt in the slot.
    expect(auto.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(auto.usage!.prompt_tokens - 1);
  });

  it("calls the named function only, and exactly once without parallel calls", async () => {
    for (const seed of [1, 2, 3]) {
      const data = await llamaServer.client.chat.completions.create({
        model: TINY_MODEL,
        messages: conversation(),
        tools: [WEATHER, TIME],
        tool_choice: { type: "function", function: { name: "get_weather" } },
        parallel_tool_calls: false,
        max_tokens: 120,
        seed,
      });
      expect(data.choices[0]!.finish_reason).toBe("tool_calls");
      const calls = data.choices[0]!.message.tool_calls! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[];
      expect(calls).toHaveLength(1);
      expectWeatherCall(calls[0]!.function.name, calls[0]!.function.arguments);
    }
  });
});

describe("bad tool requests get a 400 naming the field", () => {
  const user = [{ role: "user", content: "hi" }];
  const call = { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo", "unit": "C"}' } };
  const cases: { name: string; body: Record<string, unknown>; param: string; says: RegExp }[] = [
    {
      name: "a parameters schema the grammar cannot enforce",
      body: {
        messages: user,
        tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { q: { type: "string", pattern: "^a" } } } } }],
      },
      param: "tools[0].function.parameters",
      says: /pattern/,
    },
    {
      name: "a function name OpenAI does not allow",
      body: { messages: user, tools: [{ type: "function", function: { name: "get weather" } }] },
      param: "tools[0].function.name",
      says: /pattern|must match/,
    },
    { name: "two functions of one name", body: { messages: user, tools: [WEATHER, WEATHER] }, param: "tools[1].function.name", says: /twice/ },
    { name: "a required call with no tools", body: { messages: user, tool_choice: "required" }, param: "tool_choice", says: /no `tools`/ },
    { name: "an unknown mode", body: { messages: user, tools: [WEATHER], tool_choice: "sometimes" }, param: "tool_choice", says: /"auto"/ },
    {
      name: "a named function that is not among the tools",
      body: { messages: user, tools: [WEATHER], tool_choice: { type: "function", function: { name: "get_time" } } },
      param: "tool_choice.function.name",
      says: /get_weather/,
    },
    {
      name: "a tool message answering no call",
      body: {
        messages: [...user, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "call_2", content: "x" }],
        tools: [WEATHER],
      },
      param: "messages[2].tool_call_id",
      says: /answers no call/,
    },
    {
      name: "a call left unanswered",
      body: { messages: [...user, { role: "assistant", content: null, tool_calls: [call] }, { role: "user", content: "and?" }], tools: [WEATHER] },
      param: "messages[1].tool_calls[0]",
      says: /before messages\[2\]/,
    },
    {
      name: "call arguments that are not JSON",
      body: {
        messages: [
          ...user,
          { role: "assistant", tool_calls: [{ ...call, function: { name: "get_weather", arguments: "{city: Oslo" } }] },
          { role: "tool", tool_call_id: "call_1", content: "x" },
        ],
        tools: [WEATHER],
      },
      param: "messages[1].tool_calls[0].function.arguments",
      says: /JSON/,
    },
  ];
  for (const testCase of cases) {
    it(testCase.name, async () => {
      const response = await postRaw(server.baseURL, "/chat/completions", JSON.stringify({ model: TINY_MODEL, max_tokens: 4, ...testCase.body }));
      expect(response.status).toBe(400);
      expect(response.json.error?.param).toBe(testCase.param);
      expect(response.json.error?.message).toMatch(testCase.says);
      expect(response.json.error?.type).toBe("invalid_request_error");
    });
  }
});
